/**
 * Output formatting. Humans get aligned plain-text tables (no colours: output is pasted into
 * incident tickets); scripts get `--json`, exactly one JSON object per invocation, built with
 * the canonical protobuf JSON mapping so field names and enum names match the API docs.
 */
import { toJson, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";

/** Where a command writes. Injected, so formatting is testable without a process. */
export interface Output {
  out(text: string): void;
  err(text: string): void;
}

/** Renders rows under headers with columns padded to the widest cell; "-" for empty cells. */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const cells = rows.map((r) => headers.map((_, i) => (r[i] === undefined || r[i] === "" ? "-" : r[i]!)));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]!.length)));
  const line = (r: readonly string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ");
  return [line(headers), ...cells.map(line)].join("\n");
}

/** Renders label/value pairs as an aligned two-column block; "-" for empty values. */
export function formatFields(fields: readonly (readonly [string, string])[]): string {
  const width = Math.max(...fields.map(([k]) => k.length));
  return fields.map(([k, v]) => `${k.padEnd(width)}  ${v === "" ? "-" : v}`).join("\n");
}

/**
 * Minor units as a decimal amount in the currency's exponent (1050 EUR -> "10.50 EUR",
 * 1050 JPY -> "1050 JPY"). Integer arithmetic only: money never passes through a float.
 */
export function formatMoney(money: { amountMinor: bigint; currency: string } | undefined): string {
  if (!money) return "";
  const digits = currencyDigits(money.currency);
  const negative = money.amountMinor < 0n;
  const abs = negative ? -money.amountMinor : money.amountMinor;
  let text = abs.toString();
  if (digits > 0) {
    text = text.padStart(digits + 1, "0");
    text = `${text.slice(0, -digits)}.${text.slice(-digits)}`;
  }
  return `${negative ? "-" : ""}${text} ${money.currency}`;
}

/** ISO-4217 minor-unit exponent from ICU (display only; unknown codes fall back to 2). */
export function currencyDigits(currency: string): number {
  try {
    return new Intl.NumberFormat("en", { style: "currency", currency }).resolvedOptions().maximumFractionDigits ?? 2;
  } catch {
    return 2;
  }
}

/** RFC 3339 UTC, or "" when unset. */
export function formatTime(ts: Timestamp | undefined): string {
  return ts ? timestampDate(ts).toISOString() : "";
}

/** An enum value by its short name (SubmissionState.TIMEOUT -> "TIMEOUT"). */
export function enumName(e: Record<number, string>, value: number): string {
  return e[value] ?? String(value);
}

/** A message in canonical protobuf JSON, with every field present (scripts need stable keys). */
export function messageJson<D extends DescMessage>(schema: D, message: MessageShape<D>): unknown {
  return toJson(schema, message, { alwaysEmitImplicit: true });
}

/** Writes one JSON object, pretty-printed (jq reads it; humans can too). */
export function printJson(out: Output, value: unknown): void {
  out.out(JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v), 2));
}
