/**
 * A recorded lock history and its checker. Events are appended in the order the test process
 * observes them: "grant" when an Acquire answer arrives, "release" just before the holder sends
 * Release. A correct lock can only grant after the previous holder's release was sent, so in
 * this order grants and releases alternate, and tokens rise in grant order.
 */
export type LockEvent = { kind: "grant"; client: number; token: bigint } | { kind: "release"; client: number; token: bigint };

export interface HistoryVerdict {
  grants: number;
  overlaps: string[];
  tokenRegressions: string[];
}

export function checkHistory(events: LockEvent[]): HistoryVerdict {
  const overlaps: string[] = [];
  const tokenRegressions: string[] = [];
  let live: { client: number; token: bigint } | undefined;
  let lastToken: bigint | undefined;
  let grants = 0;
  events.forEach((e, i) => {
    if (e.kind === "grant") {
      grants++;
      if (live) overlaps.push(`#${i}: client ${e.client} granted token ${e.token} while client ${live.client} holds token ${live.token}`);
      if (lastToken !== undefined && e.token <= lastToken) tokenRegressions.push(`#${i}: token ${e.token} after ${lastToken}`);
      lastToken = e.token;
      live = { client: e.client, token: e.token };
    } else if (live && live.client === e.client && live.token === e.token) {
      live = undefined;
    }
  });
  return { grants, overlaps, tokenRegressions };
}
