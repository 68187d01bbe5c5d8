/** An executor's process: read the environment, start it (executor.ts), drain on signals. */
import { runService } from "../shared/observability/lifecycle.js";
import { createLogger } from "../shared/process/logger.js";
import { readConfig } from "./config.js";
import { startExecutor } from "./executor.js";

const logger = createLogger("executor");
runService(logger, () => startExecutor(readConfig(), { logger }));
