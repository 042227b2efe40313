// Writes .gz and .br beside every text asset of at least 1 KiB in the build
// output (../internal/webui/dist), so `maestro serve` can send them
// precompressed. The output is byte-for-byte reproducible: files are visited
// in sorted order, gzip headers carry no time or name (Node's zlib writes
// MTIME 0), and both encoders run at fixed settings.
import { readdirSync, readFileSync, writeFileSync, statSync, unlinkSync } from "node:fs";
import { join, extname } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync, brotliCompressSync, constants } from "node:zlib";

const dist = fileURLToPath(new URL("../../internal/webui/dist", import.meta.url));
const textTypes = new Set([".js", ".mjs", ".css", ".html", ".svg", ".json", ".txt", ".map", ".webmanifest"]);
const minSize = 1024;

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else out.push(p);
  }
  return out;
}

let count = 0;
for (const file of walk(dist)) {
  if (file.endsWith(".gz") || file.endsWith(".br")) {
    unlinkSync(file); // stale from an earlier run in place
    continue;
  }
  if (!textTypes.has(extname(file))) continue;
  const data = readFileSync(file);
  if (data.length < minSize) continue;
  writeFileSync(file + ".gz", gzipSync(data, { level: 9 }));
  writeFileSync(
    file + ".br",
    brotliCompressSync(data, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: 11,
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        [constants.BROTLI_PARAM_SIZE_HINT]: data.length,
      },
    }),
  );
  count++;
}
console.log(`compress: wrote .gz and .br for ${count} file(s) in ${dist}`);
