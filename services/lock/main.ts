/** The lock service's process: read the environment, start it (lock-service.ts), drain on signals. */
import { runService } from "../shared/observability/lifecycle.js";
import { createLogger } from "../shared/process/logger.js";
import { readConfig } from "./config.js";
import { startLockService } from "./lock-service.js";

const logger = createLogger("lock");
runService(logger, () => startLockService(readConfig(), { logger }));
