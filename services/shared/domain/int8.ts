/**
 * The one reader of a 64-bit integer that arrives as text: PostgreSQL's int8 columns (node-pg
 * hands them over as strings, so no precision is lost to a JavaScript number), etcd's revisions
 * and stored values, and the digits of a reference or a setting. A value that is not a whole
 * number within int8 is an error naming what it was, never a silently wrong bigint (BigInt("")
 * is 0n, BigInt(" 1 ") is 1n, and BigInt accepts hex and values far past int8).
 */
export const INT8_MIN = -(2n ** 63n);
export const INT8_MAX = 2n ** 63n - 1n;

const DECIMAL = /^-?\d{1,19}$/;

export function int8(value: string | number | bigint, what = "value"): bigint {
  let n: bigint;
  if (typeof value === "bigint") n = value;
  else if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new RangeError(`${what}: ${value} is not a whole number a bigint can be read from exactly`);
    n = BigInt(value);
  } else {
    if (!DECIMAL.test(value)) throw new RangeError(`${what}: "${value}" is not a decimal int8`);
    n = BigInt(value);
  }
  if (n < INT8_MIN || n > INT8_MAX) throw new RangeError(`${what}: ${n} is outside int8`);
  return n;
}
