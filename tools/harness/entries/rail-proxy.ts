/**
 * rail-proxy as the harness runs it when a test or drill asks for a negative control or a planted
 * stall: the product's own config and factory, with the controls the harness builds
 * (controls/rail-proxy.ts) as dependencies. The product's main.ts cannot do this.
 */
import { readConfig } from "../../../services/rail-proxy/config.js";
import { startRailProxy } from "../../../services/rail-proxy/rail-proxy.js";
import { runService } from "../../../services/shared/observability/lifecycle.js";
import { createLogger } from "../../../services/shared/process/logger.js";
import { railProxyControls } from "../controls/rail-proxy.js";

const logger = createLogger("rail-proxy");
runService(logger, () => startRailProxy(readConfig(), { logger, controls: railProxyControls(process.env) }));
