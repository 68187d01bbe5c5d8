/**
 * Decodes an OTLP/HTTP protobuf trace export (ExportTraceServiceRequest) into the shape of its
 * OTLP/JSON form, so the test receiver accepts the exporters' default protocol (http/protobuf,
 * the chart's default) as well as http/json. Only the fields the tests read are decoded; every
 * other field is skipped by wire type. Field numbers: opentelemetry-proto trace/v1, common/v1,
 * resource/v1, collector/trace/v1.
 */
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

export type AnyValue = { stringValue?: string; intValue?: string; boolValue?: boolean; doubleValue?: number };
export interface KeyValue {
  key: string;
  value: AnyValue;
}
export interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  status?: { code?: number };
  attributes?: KeyValue[];
}
export interface JsonExport {
  resourceSpans: Array<{ resource: { attributes: KeyValue[] }; scopeSpans: Array<{ spans: JsonSpan[] }> }>;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

/** Calls onField(fieldNo, wireType, reader) for each field of the message in buf. */
function fields(buf: Uint8Array, onField: (no: number, wt: WireType, r: BinaryReader) => boolean): void {
  const r = new BinaryReader(buf);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (!onField(no, wt, r)) r.skip(wt, no);
  }
}

function anyValue(buf: Uint8Array): AnyValue {
  const v: AnyValue = {};
  fields(buf, (no, _wt, r) => {
    if (no === 1) v.stringValue = r.string();
    else if (no === 2) v.boolValue = r.bool();
    else if (no === 3) v.intValue = String(r.int64());
    else if (no === 4) v.doubleValue = r.double();
    else return false;
    return true;
  });
  return v;
}

function keyValue(buf: Uint8Array): KeyValue {
  const kv: KeyValue = { key: "", value: {} };
  fields(buf, (no, _wt, r) => {
    if (no === 1) kv.key = r.string();
    else if (no === 2) kv.value = anyValue(r.bytes());
    else return false;
    return true;
  });
  return kv;
}

function span(buf: Uint8Array): JsonSpan {
  const s: JsonSpan = { traceId: "", spanId: "", name: "", kind: 0, attributes: [] };
  fields(buf, (no, _wt, r) => {
    if (no === 1) s.traceId = hex(r.bytes());
    else if (no === 2) s.spanId = hex(r.bytes());
    else if (no === 4) s.parentSpanId = hex(r.bytes());
    else if (no === 5) s.name = r.string();
    else if (no === 6) s.kind = r.int32();
    else if (no === 9) s.attributes!.push(keyValue(r.bytes()));
    else if (no === 15) {
      const status: { code?: number } = {};
      fields(r.bytes(), (sno, _swt, sr) => (sno === 3 ? ((status.code = sr.int32()), true) : false));
      s.status = status;
    } else return false;
    return true;
  });
  return s;
}

export function decodeTraceExport(buf: Uint8Array): JsonExport {
  const out: JsonExport = { resourceSpans: [] };
  fields(buf, (no, _wt, r) => {
    if (no !== 1) return false;
    const rs: JsonExport["resourceSpans"][number] = { resource: { attributes: [] }, scopeSpans: [] };
    fields(r.bytes(), (rno, _rwt, rr) => {
      if (rno === 1) fields(rr.bytes(), (ano, _awt, ar) => (ano === 1 ? (rs.resource.attributes.push(keyValue(ar.bytes())), true) : false));
      else if (rno === 2) {
        const spans: JsonSpan[] = [];
        fields(rr.bytes(), (sno, _swt, sr) => (sno === 2 ? (spans.push(span(sr.bytes())), true) : false));
        rs.scopeSpans.push({ spans });
      } else return false;
      return true;
    });
    out.resourceSpans.push(rs);
    return true;
  });
  return out;
}
