import "@testing-library/jest-dom/vitest";
import { afterEach } from "vitest";
import { cleanup, configure } from "@testing-library/react";

afterEach(() => {
  cleanup();
  sessionStorage.clear();
  localStorage.clear();
});

// The machine running the tests may be busy: give async queries time.
configure({ asyncUtilTimeout: 5000 });
