/** The payouts API's process: read the environment, start it (payouts-service.ts), drain on signals. */
import { runService } from "../shared/observability/lifecycle.js";
import { createLogger } from "../shared/process/logger.js";
import { readConfig } from "./config.js";
import { startPayouts } from "./payouts-service.js";

const logger = createLogger("payouts");
runService(logger, () => startPayouts(readConfig(), { logger }));
