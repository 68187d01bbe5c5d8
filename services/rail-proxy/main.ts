/** rail-proxy's process: read the environment, start it (rail-proxy.ts), drain on signals. */
import { runService } from "../shared/observability/lifecycle.js";
import { createLogger } from "../shared/process/logger.js";
import { readConfig } from "./config.js";
import { startRailProxy } from "./rail-proxy.js";

const logger = createLogger("rail-proxy");
runService(logger, () => startRailProxy(readConfig(), { logger }));
