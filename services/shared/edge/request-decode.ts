/**
 * Turns request bytes into a message, or into one refusal: invalid_argument, reason
 * MALFORMED_REQUEST, naming the field when one is at fault and a fixed problem word, never the
 * decoder's own text. Any server stack can call it before its handler sees the request; every
 * failure of the underlying decoders is caught here, so none can surface as `internal`.
 */
import { fromBinary, fromJson, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { isFieldError } from "@bufbuild/protobuf/reflect";
import { DomainError, REASONS } from "../domain/errors.js";
import { checkWire, WireError } from "../rpc/wire-check.js";

/** Why a body could not be read as a request (the ErrorInfo metadata "problem"). */
export type MalformedProblem =
  | WireError["problem"]
  | "incomplete_envelope"
  | "extra_data"
  | "missing_message"
  | "bad_flags"
  | "bad_compression"
  | "invalid_json"
  | "invalid_value"
  | "invalid_timeout";

/** The refusal every malformed request gets. */
export function malformedRequest(problem: MalformedProblem, field?: string, cause?: unknown): DomainError {
  const where = field ? ` (field ${field})` : "";
  return new DomainError(
    REASONS.MALFORMED_REQUEST,
    `malformed request: ${problem.replaceAll("_", " ")}${where}`,
    field ? { field, problem } : { problem },
    undefined,
    { cause },
  );
}

/** Decodes protobuf binary strictly (see wire-check.ts); throws malformedRequest. */
export function decodeBinaryRequest<D extends DescMessage>(desc: D, bytes: Uint8Array): MessageShape<D> {
  try {
    checkWire(desc, bytes);
    return fromBinary(desc, bytes);
  } catch (err) {
    if (err instanceof WireError) throw malformedRequest(err.problem, err.field, err);
    throw malformedRequest("truncated", undefined, err);
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Decodes a Connect JSON body: strict UTF-8 (a replacement character would silently change the
 * text), no lone surrogates in any string (they cannot be represented in protobuf), and no key
 * that names no field: a typo ("clientRefrence") would otherwise drop the value silently and
 * run the request without it (decision 050). Throws malformedRequest or unknownField.
 */
export function decodeJsonRequest<D extends DescMessage>(desc: D, bytes: Uint8Array): MessageShape<D> {
  let json: unknown;
  try {
    json = JSON.parse(utf8.decode(bytes));
  } catch (err) {
    throw malformedRequest(err instanceof SyntaxError ? "invalid_json" : "invalid_utf8", undefined, err);
  }
  if (hasLoneSurrogate(json)) throw malformedRequest("invalid_utf8");
  const unknown = unknownJsonField(desc, json);
  if (unknown !== undefined) throw unknownField(desc, unknown);
  try {
    // Strict as well: an unknown enum name is refused (invalid_value), not read as unset.
    return fromJson(desc, json as never, { ignoreUnknownFields: false });
  } catch (err) {
    throw malformedRequest("invalid_value", isFieldError(err) ? err.field().name : jsonErrorField(desc, err), err);
  }
}

/** Longest unknown key echoed back (the client wrote it; a refusal must stay small). */
const MAX_ECHOED_KEY = 64;

/** The refusal for a JSON key that names no field; `path` is the key as written, under its parents. */
export function unknownField(desc: DescMessage, path: string): DomainError {
  const field = path.length > MAX_ECHOED_KEY ? `${path.slice(0, MAX_ECHOED_KEY)}...` : path;
  return new DomainError(REASONS.UNKNOWN_FIELD, `unknown field ${JSON.stringify(field)} in ${desc.typeName}`, { field });
}

/**
 * The first key of a JSON request that is neither the proto name nor the JSON name of a field,
 * looked for through nested messages (lists and maps of messages included), as a dotted path:
 * parents by proto name, the unknown key as the client wrote it. Well-known types have JSON
 * forms of their own and are left to fromJson, which refuses their unknown keys too.
 */
export function unknownJsonField(desc: DescMessage, json: unknown, prefix = ""): string | undefined {
  if (json === null || typeof json !== "object" || Array.isArray(json) || desc.typeName.startsWith("google.protobuf.")) return undefined;
  for (const [key, value] of Object.entries(json)) {
    const field = desc.fields.find((f) => f.name === key || f.jsonName === key);
    if (!field) return `${prefix}${key}`;
    if (value === null || typeof value !== "object") continue;
    const path = `${prefix}${field.name}.`;
    let found: string | undefined;
    if (field.fieldKind === "message") found = unknownJsonField(field.message, value, path);
    else if (field.fieldKind === "list" && field.listKind === "message" && Array.isArray(value)) {
      for (const item of value) found ??= unknownJsonField(field.message, item, path);
    } else if (field.fieldKind === "map" && field.mapKind === "message") {
      for (const [k, item] of Object.entries(value)) found ??= unknownJsonField(field.message, item, `${path}${k}.`);
    }
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * The field a fromJson failure is about. fromJson (2.17) throws plain Errors that name it only in
 * their text ("cannot decode field <type>.<field> from JSON: ..."); the text is read here to
 * name the field from our own schema, and is never sent. Unrecognised text names no field.
 */
function jsonErrorField(desc: DescMessage, err: unknown): string | undefined {
  const m = err instanceof Error ? /^cannot decode field ([\w.]+)\.(\w+) from JSON/.exec(err.message) : null;
  if (!m) return undefined;
  const [, typeName, name] = m;
  if (typeName === desc.typeName) return desc.fields.find((f) => f.name === name)?.name;
  const parent = desc.fields.find(
    (f) => (f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message")) && f.message.typeName === typeName,
  );
  return parent?.message?.fields.some((f) => f.name === name) ? `${parent.name}.${name}` : undefined;
}

/** Decodes a request body in the codec the content type named. */
export function decodeRequest<D extends DescMessage>(desc: D, bytes: Uint8Array, binary: boolean): MessageShape<D> {
  return binary ? decodeBinaryRequest(desc, bytes) : decodeJsonRequest(desc, bytes);
}

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function hasLoneSurrogate(v: unknown): boolean {
  if (typeof v === "string") return LONE_SURROGATE.test(v);
  if (Array.isArray(v)) return v.some(hasLoneSurrogate);
  if (v !== null && typeof v === "object") return Object.entries(v).some(([k, x]) => LONE_SURROGATE.test(k) || hasLoneSurrogate(x));
  return false;
}
