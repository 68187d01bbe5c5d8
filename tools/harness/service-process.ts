/**
 * Runs one railfence service as a real OS process (compiled JS under dist/), waits for its
 * "ready" log line (which carries the ports it bound, so every port can be 0), and lets
 * tests and drills SIGKILL, SIGSTOP/SIGCONT, restart or drain it. Its JSON log lines are
 * kept in memory (for assertions and secret scans) and optionally forwarded.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { controlsIn } from "./controls/variables.js";
import { heapArgs } from "./node-heap.js";

export interface ReadyInfo {
  port: number;
  metricsPort: number;
  controlPort?: number;
  [k: string]: unknown;
}

export interface ServiceProcessOptions {
  /** Folder under services/ (e.g. "rail-proxy"). */
  service: string;
  /** Name for logs (e.g. "rail-proxy-2"). */
  name?: string;
  env: Record<string, string | undefined>;
  /** Extra arguments after main.js. */
  args?: string[];
  /** Extra node flags before it (e.g. --cpu-prof for profiling runs). */
  nodeArgs?: string[];
  /** Called with every output line (JSON logs). */
  onLine?: (name: string, line: string) => void;
  /** Wait for the ready line (false for one-shot jobs). */
  waitReady?: boolean;
  readyTimeoutMs?: number;
  /** The process serves TLS (its TLS_* files are in env): url is https://. */
  tls?: boolean;
  /**
   * Run the service from another build laid out like this checkout (package.json, migrations,
   * node_modules, dist/services), e.g. the product compiled as the image compiles it. Default:
   * this checkout's dist/.
   */
  root?: string;
  /**
   * Hands each output line to `lines` (and onLine, and the ready check) this many ms after it
   * arrived, in order; the exit follows the last line. Default: HARNESS_LOG_DELAY_MS, else 0.
   * The negative control for tests that read a log line: a test that waits for the line it
   * reads still passes with a delay, one that reads it after waiting for something else fails.
   */
  logDelayMs?: number;
}

/** The log delay tests run under (HARNESS_LOG_DELAY_MS), 0 when unset. */
export function harnessLogDelayMs(): number {
  const v = Number(process.env.HARNESS_LOG_DELAY_MS ?? "0");
  return Number.isFinite(v) && v > 0 ? v : 0;
}

/** The compiled entry point of service under root (default: this checkout). */
export function serviceEntry(service: string, root: string = projectRoot()): string {
  return join(root, "dist", "services", service, "main.js");
}

/**
 * The harness's entry of service (tools/harness/entries), which builds the product with the
 * controls env asks for: used when env sets one (controls/variables.ts) and the process runs from
 * this checkout. Otherwise the product's own main.js, which ignores them.
 */
export function entryFor(service: string, env: Record<string, string | undefined>, root?: string): string {
  if (root === undefined && controlsIn(service, env).length > 0) return join(projectRoot(), "dist", "tools", "harness", "entries", `${service}.js`);
  return serviceEntry(service, root);
}

export class ServiceProcess {
  child: ChildProcess | undefined;
  ready: ReadyInfo | undefined;
  readonly lines: string[] = [];
  private exitWaiters: Array<(code: number | null) => void> = [];
  /** Set when the current child's output has all been delivered (its pipes closed) and it exited. */
  private ended = true;
  lastExit: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  constructor(readonly opts: ServiceProcessOptions) {}

  get name(): string {
    return this.opts.name ?? this.opts.service;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process; resolves with its ready line (or at spawn if waitReady is false). */
  async start(envOverride: Record<string, string | undefined> = {}): Promise<ReadyInfo | undefined> {
    if (this.running) throw new Error(`${this.name} is already running`);
    // A child that exited but whose last lines are still being read: let it end first.
    if (!this.ended) await this.waitExit();
    const env: Record<string, string> = {};
    const defaults = { OTEL_SERVICE_NAME: this.opts.service };
    for (const [k, v] of Object.entries({ ...defaults, ...process.env, ...this.opts.env, ...envOverride })) if (v !== undefined) env[k] = v;
    // Telemetry is loaded before the service (it decides from OTEL_* whether to start at all).
    const root = this.opts.root ?? projectRoot();
    const instrumentation = join(root, "dist", "services", "shared", "observability", "instrumentation.js");
    const child = spawn(
      process.execPath,
      // The chart's heap limit first, so that a caller's nodeArgs can still override it.
      [
        ...heapArgs(this.opts.service),
        ...(this.opts.nodeArgs ?? []),
        "--import",
        instrumentation,
        entryFor(this.opts.service, env, this.opts.root),
        ...(this.opts.args ?? []),
      ],
      {
        env,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    this.child = child;
    this.ready = undefined;
    let readyResolve: ((r: ReadyInfo) => void) | undefined;
    let readyReject: ((e: Error) => void) | undefined;
    const ready = new Promise<ReadyInfo>((res, rej) => {
      readyResolve = res;
      readyReject = rej;
    });
    // Nobody awaits `ready` for one-shot jobs: an early exit must not become an unhandled rejection.
    ready.catch(() => {});
    this.ended = false;
    const delayMs = this.opts.logDelayMs ?? harnessLogDelayMs();
    // In arrival order: equal timeouts fire in the order they were set.
    const later = (fn: () => void) => (delayMs > 0 ? setTimeout(fn, delayMs) : fn());
    const deliver = (line: string) => {
      this.lines.push(line);
      this.opts.onLine?.(this.name, line);
      if (line.includes('"event":"ready"')) {
        try {
          this.ready = JSON.parse(line) as ReadyInfo;
          readyResolve?.(this.ready);
        } catch {
          // not JSON after all
        }
      }
    };
    const onChunk = (() => {
      let buffered = "";
      return (chunk: Buffer) => {
        buffered += chunk.toString("utf8");
        let nl;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          later(() => deliver(line));
        }
      };
    })();
    child.stdout!.on("data", onChunk);
    child.stderr!.on("data", onChunk);
    // "close", not "exit": the process has exited AND its output is all read, so a test that
    // waited for the exit sees every line the process wrote.
    child.once("close", (code, signal) =>
      later(() => {
        this.lastExit = { code, signal };
        this.ended = true;
        readyReject?.(new Error(`${this.name} exited (code ${code}, signal ${signal}) before it was ready:\n${this.lines.slice(-20).join("\n")}`));
        for (const w of this.exitWaiters.splice(0)) w(code);
      }),
    );
    if (this.opts.waitReady === false) return undefined;
    const timeoutMs = this.opts.readyTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, rej) => {
      timer = setTimeout(() => rej(new Error(`${this.name} not ready within ${timeoutMs} ms:\n${this.lines.slice(-20).join("\n")}`)), timeoutMs);
    });
    try {
      return await Promise.race([ready, timeout]);
    } catch (err) {
      this.kill("SIGKILL");
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Resolves with the exit code when the process ends (immediately if not running). */
  waitExit(): Promise<number | null> {
    if (this.ended) return Promise.resolve(this.lastExit?.code ?? null);
    return new Promise((resolve) => this.exitWaiters.push(resolve));
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (this.running) this.child!.kill(signal);
  }

  pause(): void {
    this.kill("SIGSTOP");
  }

  resume(): void {
    this.kill("SIGCONT");
  }

  /** SIGTERM (graceful drain), SIGKILL after boundMs. */
  async stop(boundMs = 20_000): Promise<number | null> {
    if (!this.running) return this.waitExit();
    const exited = this.waitExit();
    this.child!.kill("SIGCONT");
    this.child!.kill("SIGTERM");
    const timer = setTimeout(() => this.kill("SIGKILL"), boundMs);
    const code = await exited;
    clearTimeout(timer);
    return code;
  }

  /** SIGKILL (if running) and start again on the same ports, so its address stays valid. */
  async restart(envOverride: Record<string, string | undefined> = {}): Promise<ReadyInfo | undefined> {
    if (!this.ended) {
      const exited = this.waitExit();
      this.kill("SIGKILL");
      await exited;
    }
    const samePorts: Record<string, string> = {};
    if (this.ready) {
      samePorts.PORT = String(this.ready.port);
      samePorts.METRICS_PORT = String(this.ready.metricsPort);
      if (this.ready.controlPort) samePorts.RAIL_STUB_CONTROL_PORT = String(this.ready.controlPort);
    }
    return this.start({ ...samePorts, ...envOverride });
  }

  /** The address clients use: http://127.0.0.1:<port> (https:// when the process serves TLS). */
  get url(): string {
    if (!this.ready) throw new Error(`${this.name} is not ready`);
    return `${this.opts.tls ? "https" : "http"}://127.0.0.1:${this.ready.port}`;
  }
}
