/** An executor's process: read the environment, start it (executor.ts), drain on signals. */
import { runService } from "../shared/lifecycle.js";
import { createLogger } from "../shared/logger.js";
import { readConfig } from "./config.js";
import { startExecutor } from "./executor.js";

const logger = createLogger("executor");
runService(logger, () => startExecutor(readConfig(), { logger }));
