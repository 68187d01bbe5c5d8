/**
 * A strict walk over protobuf binary, against the request's schema, before anything decodes it.
 *
 * Why: @bufbuild/protobuf's fromBinary (2.17) picks a field's reader by field number alone and
 * never looks at the wire type on the wire. A uint32 field sent as fixed64 is read as a varint
 * out of the fixed64's bytes (an Acquire whose ttl_ms arrived as fixed64 9d0ead45.. became
 * ttl_ms = 1821), and the rest of the message is then parsed from the wrong offset. C++ and Go
 * treat such a field as unknown; railfence refuses the request (decision 008): a client built
 * from our protos never sends one, so it is a bug or an attack, and silently dropping the field
 * would execute something the caller did not ask for either.
 *
 * The walk also refuses what fromBinary accepts but would misread or cannot represent: a 32-bit
 * varint field carrying a value that does not fit 32 bits (fromBinary truncates it), a 64-bit
 * varint longer than 10 bytes or past 2^64, a sub-message whose fields run past its declared
 * length, strings that are not UTF-8. Unknown field numbers stay unknown (skipped), as protobuf
 * requires. Every refusal names the field by its dotted proto path and a fixed problem word;
 * decoder text never reaches a client.
 */
import { isUtf8 } from "node:buffer";
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";

export type WireProblem = "bad_tag" | "truncated" | "wrong_wire_type" | "value_out_of_range" | "invalid_utf8" | "bad_group" | "too_deep";

/** Thrown by checkWire; `field` is the dotted proto path when the problem is inside a known field. */
export class WireError extends Error {
  constructor(
    readonly problem: WireProblem,
    readonly field?: string,
  ) {
    super(field ? `${problem} in field ${field}` : problem);
    this.name = "WireError";
  }
}

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const SGROUP = 3;
const EGROUP = 4;
const I32 = 5;
const MAX_DEPTH = 100;

/** The wire type a scalar is written with. */
function scalarWireType(t: ScalarType): number {
  switch (t) {
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return I64;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return I32;
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return LEN;
    default:
      return VARINT;
  }
}

const byNumber = new WeakMap<DescMessage, Map<number, DescField>>();
function fieldsOf(desc: DescMessage): Map<number, DescField> {
  let m = byNumber.get(desc);
  if (!m) {
    m = new Map(desc.fields.map((f) => [f.number, f]));
    byNumber.set(desc, m);
  }
  return m;
}

/** Throws WireError unless bytes are a well-formed `desc` with every known field in its own wire type. */
export function checkWire(desc: DescMessage, bytes: Uint8Array): void {
  new Walker(bytes).message(desc, bytes.byteLength, "", 0, undefined);
}

/**
 * One pass over the bytes. Varints are read into two unsigned 32-bit halves (lo, hi), as
 * protobuf's own readers do, so the common path allocates nothing.
 */
class Walker {
  private pos = 0;
  private lo = 0;
  private hi = 0;

  constructor(private readonly buf: Uint8Array) {}

  /** Walks fields up to end (or to the EndGroup of `group`). */
  message(desc: DescMessage, end: number, prefix: string, depth: number, group: number | undefined): void {
    const where = prefix || undefined;
    if (depth > MAX_DEPTH) throw new WireError("too_deep", where);
    const fields = fieldsOf(desc);
    while (this.pos < end) {
      const [fieldNo, wt] = this.tag(end, where);
      if (wt === EGROUP) {
        if (group === fieldNo) return;
        throw new WireError("bad_group", where);
      }
      const field = fields.get(fieldNo);
      if (field) this.known(field, wt, end, `${prefix}${field.name}`, depth);
      else this.skip(wt, fieldNo, end, where, depth);
    }
    if (group !== undefined) throw new WireError("bad_group", where);
  }

  private tag(end: number, where: string | undefined): [number, number] {
    this.varint(end, where);
    const fieldNo = this.lo >>> 3;
    const wt = this.lo & 7;
    if (this.hi !== 0 || fieldNo === 0 || wt > 5) throw new WireError("bad_tag", where);
    return [fieldNo, wt];
  }

  private known(field: DescField, wt: number, end: number, path: string, depth: number): void {
    switch (field.fieldKind) {
      case "scalar":
        return this.scalar(field.scalar, wt, end, path);
      case "enum":
        return this.scalar(ScalarType.INT32, wt, end, path);
      case "message":
        return this.child(field.message, field.delimitedEncoding, field.number, wt, end, path, depth);
      case "list": {
        if (field.listKind === "message") return this.child(field.message, field.delimitedEncoding, field.number, wt, end, path, depth);
        const t = field.listKind === "enum" ? ScalarType.INT32 : field.scalar;
        const natural = scalarWireType(t);
        if (wt === LEN && natural !== LEN) {
          // Packed: a run of values of the element's own wire type.
          const stop = this.length(end, path);
          while (this.pos < stop) this.value(t, natural, stop, path);
          return;
        }
        return this.scalar(t, wt, end, path);
      }
      case "map": {
        if (wt !== LEN) throw new WireError("wrong_wire_type", path);
        const stop = this.length(end, path);
        while (this.pos < stop) {
          const [no, ewt] = this.tag(stop, path);
          if (no === 1) this.scalar(field.mapKey, ewt, stop, path);
          else if (no === 2 && field.mapKind === "message") this.child(field.message, false, 2, ewt, stop, path, depth);
          else if (no === 2) this.scalar(field.mapKind === "scalar" ? field.scalar : ScalarType.INT32, ewt, stop, path);
          else this.skip(ewt, no, stop, path, depth);
        }
        return;
      }
    }
  }

  private child(desc: DescMessage, delimited: boolean, fieldNo: number, wt: number, end: number, path: string, depth: number): void {
    if (delimited) {
      if (wt !== SGROUP) throw new WireError("wrong_wire_type", path);
      return this.message(desc, end, `${path}.`, depth + 1, fieldNo);
    }
    if (wt !== LEN) throw new WireError("wrong_wire_type", path);
    const stop = this.length(end, path);
    this.message(desc, stop, `${path}.`, depth + 1, undefined);
  }

  private scalar(t: ScalarType, wt: number, end: number, path: string): void {
    const natural = scalarWireType(t);
    if (wt !== natural) throw new WireError("wrong_wire_type", path);
    this.value(t, natural, end, path);
  }

  /** One value of scalar type t whose wire type is already checked. */
  private value(t: ScalarType, wt: number, end: number, path: string): void {
    if (wt === I64) return this.fixed(8, end, path);
    if (wt === I32) return this.fixed(4, end, path);
    if (wt === LEN) {
      const stop = this.length(end, path);
      if (t === ScalarType.STRING && !isUtf8(this.buf.subarray(this.pos, stop))) throw new WireError("invalid_utf8", path);
      this.pos = stop;
      return;
    }
    this.varint(end, path);
    // fromBinary keeps only the low 32 bits of these: a larger value would silently become another number.
    const fits =
      t === ScalarType.UINT32 || t === ScalarType.SINT32
        ? this.hi === 0
        : t === ScalarType.INT32
          ? (this.hi === 0 && this.lo < 0x8000_0000) || (this.hi === 0xffff_ffff && this.lo >= 0x8000_0000)
          : true;
    if (!fits) throw new WireError("value_out_of_range", path);
  }

  /** Skips an unknown field of any valid wire type (groups included, bounded in depth). */
  private skip(wt: number, fieldNo: number, end: number, where: string | undefined, depth: number): void {
    switch (wt) {
      case VARINT:
        return this.varint(end, where);
      case I64:
        return this.fixed(8, end, where);
      case I32:
        return this.fixed(4, end, where);
      case LEN:
        this.pos = this.length(end, where);
        return;
      case SGROUP: {
        if (depth >= MAX_DEPTH) throw new WireError("too_deep", where);
        for (;;) {
          if (this.pos >= end) throw new WireError("bad_group", where);
          const [no, inner] = this.tag(end, where);
          if (inner === EGROUP) {
            if (no !== fieldNo) throw new WireError("bad_group", where);
            return;
          }
          this.skip(inner, no, end, where, depth + 1);
        }
      }
      default:
        throw new WireError("bad_group", where);
    }
  }

  private fixed(n: number, end: number, where: string | undefined): void {
    if (this.pos + n > end) throw new WireError("truncated", where);
    this.pos += n;
  }

  /** Reads a length prefix; returns where the bytes it covers end (within end), leaving pos at their start. */
  private length(end: number, where: string | undefined): number {
    this.varint(end, where);
    if (this.hi !== 0 || this.lo > end - this.pos) throw new WireError("truncated", where);
    return this.pos + this.lo;
  }

  /** A varint of at most 10 bytes whose value fits 64 bits, into lo and hi. */
  private varint(end: number, where: string | undefined): void {
    const buf = this.buf;
    let pos = this.pos;
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) throw new WireError("truncated", where);
      const b = buf[pos++]!;
      if (i < 4) lo |= (b & 0x7f) << (7 * i);
      else if (i === 4) {
        lo |= (b & 0x0f) << 28;
        hi |= (b & 0x7f) >> 4;
      } else {
        if (i === 9 && b > 1) throw new WireError("value_out_of_range", where);
        hi |= (b & 0x7f) << (7 * i - 32);
      }
      if ((b & 0x80) === 0) {
        this.pos = pos;
        this.lo = lo >>> 0;
        this.hi = hi >>> 0;
        return;
      }
    }
    throw new WireError("value_out_of_range", where);
  }
}
