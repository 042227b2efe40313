import { describe, expect, it } from "vitest";
import { queueFromMetrics } from "./metrics";

describe("queueFromMetrics", () => {
  it("reads the job gauges and nothing else", () => {
    const text = [
      "# HELP maestro_jobs Jobs in the store by state.",
      "# TYPE maestro_jobs gauge",
      'maestro_jobs{state="queued"} 4',
      'maestro_jobs{state="running"} 2',
      'maestro_jobs{state="succeeded"} 1e+03',
      'maestro_queue_claimed_total{state="queued"} 9',
      "maestro_jobs 7",
    ].join("\n");
    expect(queueFromMetrics(text)).toEqual({ queued: 4, running: 2, succeeded: 1000 });
  });
});
