import { describe } from "vitest";
import { lockConformance } from "./conformance.js";
import { pgFixture } from "./lock-fixture.js";

describe("lock conformance: pg backend", () => lockConformance(pgFixture));
