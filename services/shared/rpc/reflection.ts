/**
 * gRPC server reflection (grpc.reflection.v1 and, for older tools, v1alpha) on the Connect
 * router, so `grpcurl` and `buf curl` can list and call every railfence service without the
 * proto files. No Connect package exists for it; the two versions are the same wire protocol
 * under two names, so one answer function serves both.
 *
 * What it reveals is exactly the schema of the services this server registered (and the files
 * they import): the same contracts that are in the repository, nothing about state. Under
 * mutual TLS any verified identity may call it (authz.ts); unidentified callers may not.
 *
 * Register it last (`registerReflection(router)` after every other service), so its answers
 * are read from the router's handlers at call time and always match what is really served.
 *
 * Besides the services' files it serves every file a response can mention without importing it:
 * google/rpc/error_details.proto (the ErrorInfo and RetryInfo on every refusal) and
 * google/rpc/status.proto (grpc-status-details-bin), so grpcurl and buf curl print a refusal's
 * details decoded instead of "google.rpc.ErrorInfo is not recognized".
 */
import { toBinary, type DescFile, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter } from "@connectrpc/connect";
import { ServerReflection as ReflectionV1, type ServerReflectionRequest } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ReflectionV1Alpha } from "../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { file_google_rpc_error_details } from "../gen/google/rpc/error_details_pb.js";
import { file_google_rpc_status } from "../gen/google/rpc/status_pb.js";

/** Files no service imports but every answer may carry: error details and the status around them. */
const RESPONSE_FILES: readonly DescFile[] = [file_google_rpc_status, file_google_rpc_error_details];

/** Fully qualified names of the reflection services (authz.ts opens them to identified callers). */
export const REFLECTION_SERVICES: readonly string[] = [ReflectionV1.typeName, ReflectionV1Alpha.typeName];

/**
 * The files behind the router's services, with every file they import, by file name as clients
 * ask for it: "google/rpc/status.proto" (the descriptor's name; DescFile.name drops ".proto").
 */
function filesOf(services: Iterable<DescService>): Map<string, DescFile> {
  const files = new Map<string, DescFile>();
  const add = (f: DescFile) => {
    if (files.has(f.proto.name)) return;
    files.set(f.proto.name, f);
    for (const dep of f.dependencies) add(dep);
  };
  for (const s of services) add(s.file);
  for (const f of RESPONSE_FILES) add(f);
  return files;
}

/** A file and everything it imports, dependencies first, serialized (what clients expect). */
function withDependencies(file: DescFile): Uint8Array[] {
  const out: Uint8Array[] = [];
  const seen = new Set<string>();
  const walk = (f: DescFile) => {
    if (seen.has(f.name)) return;
    seen.add(f.name);
    for (const dep of f.dependencies) walk(dep);
    out.push(toBinary(FileDescriptorProtoSchema, f.proto));
  };
  walk(file);
  return out;
}

/** The file that declares a fully-qualified symbol: a type, a service, a method, a field or an enum value. */
function fileContainingSymbol(files: Map<string, DescFile>, symbol: string): DescFile | undefined {
  const name = symbol.replace(/^\./, "");
  for (const file of files.values()) {
    for (const s of file.services) {
      if (s.typeName === name || s.methods.some((m) => `${s.typeName}.${m.name}` === name)) return file;
    }
    for (const m of allMessages(file)) {
      if (m.typeName === name || m.fields.some((f) => `${m.typeName}.${f.name}` === name) || m.oneofs.some((o) => `${m.typeName}.${o.name}` === name))
        return file;
    }
    for (const e of allEnums(file)) {
      if (e.typeName === name || e.values.some((v) => `${e.typeName.slice(0, e.typeName.lastIndexOf(".") + 1)}${v.name}` === name)) return file;
    }
    if (allExtensions(file).some((x) => x.typeName === name)) return file;
  }
  return undefined;
}

function allMessages(file: DescFile): DescMessage[] {
  const out: DescMessage[] = [];
  const walk = (list: readonly DescMessage[]) => {
    for (const m of list) {
      out.push(m);
      walk(m.nestedMessages);
    }
  };
  walk(file.messages);
  return out;
}

function allEnums(file: DescFile) {
  return [...file.enums, ...allMessages(file).flatMap((m) => m.nestedEnums)];
}

function allExtensions(file: DescFile) {
  return [...file.extensions, ...allMessages(file).flatMap((m) => m.nestedExtensions)];
}

const notFound = (message: string) => ({ case: "errorResponse" as const, value: { errorCode: Code.NotFound, errorMessage: message } });

/** One answer per request on the stream (the protocol's only shape). */
function answerFor(req: ServerReflectionRequest, services: () => DescService[]) {
  const files = filesOf(services());
  const r = req.messageRequest;
  const respond = (messageResponse: ReturnType<typeof notFound> | { case: string; value: object }) => ({
    validHost: req.host,
    originalRequest: req,
    messageResponse,
  });
  switch (r.case) {
    case "listServices":
      return respond({ case: "listServicesResponse", value: { service: [...new Set(services().map((s) => s.typeName))].map((name) => ({ name })) } });
    case "fileByFilename": {
      const file = files.get(r.value);
      return respond(file ? { case: "fileDescriptorResponse", value: { fileDescriptorProto: withDependencies(file) } } : notFound(`file ${r.value} not found`));
    }
    case "fileContainingSymbol": {
      const file = fileContainingSymbol(files, r.value);
      return respond(
        file ? { case: "fileDescriptorResponse", value: { fileDescriptorProto: withDependencies(file) } } : notFound(`symbol ${r.value} not found`),
      );
    }
    case "fileContainingExtension": {
      const { containingType, extensionNumber } = r.value;
      for (const file of files.values()) {
        if (allExtensions(file).some((x) => x.extendee.typeName === containingType && x.number === extensionNumber)) {
          return respond({ case: "fileDescriptorResponse", value: { fileDescriptorProto: withDependencies(file) } });
        }
      }
      return respond(notFound(`extension ${extensionNumber} of ${containingType} not found`));
    }
    case "allExtensionNumbersOfType": {
      const type = r.value.replace(/^\./, "");
      const known = [...files.values()].some((f) => allMessages(f).some((m) => m.typeName === type));
      if (!known) return respond(notFound(`type ${type} not found`));
      const numbers = [...files.values()].flatMap((f) =>
        allExtensions(f)
          .filter((x) => x.extendee.typeName === type)
          .map((x) => x.number),
      );
      return respond({ case: "allExtensionNumbersResponse", value: { baseTypeName: type, extensionNumber: numbers } });
    }
    default:
      return respond({ case: "errorResponse", value: { errorCode: Code.InvalidArgument, errorMessage: "empty reflection request" } });
  }
}

/** Registers grpc.reflection.v1 and v1alpha, describing every service registered on router. */
export function registerReflection(router: ConnectRouter): void {
  const services = () => router.handlers.map((h) => h.service);
  const impl = {
    async *serverReflectionInfo(requests: AsyncIterable<ServerReflectionRequest>) {
      for await (const req of requests) yield answerFor(req, services) as never;
    },
  };
  router.service(ReflectionV1, impl);
  // v1alpha messages are field-for-field the same as v1's.
  router.service(ReflectionV1Alpha, impl as never);
}
