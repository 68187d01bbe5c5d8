/** The rail stub's process: read the environment, start it (rail-stub.ts), drain on signals. */
import { runService } from "../shared/observability/lifecycle.js";
import { createLogger } from "../shared/process/logger.js";
import { readConfig } from "./config.js";
import { startRailStub } from "./rail-stub.js";

const logger = createLogger("rail-stub");
runService(logger, () => startRailStub(readConfig(), { logger }));
