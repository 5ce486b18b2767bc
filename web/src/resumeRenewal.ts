/**
 * Keeping this tab's resume token fresh for as long as the person is in the room.
 *
 * The page service's resume token is accepted for a few minutes from when it was issued (`resume_ttl_s`). The page
 * presents it to come back to its own room after a reload or when livekit-server shut down under the conversation
 * (App.tsx); a conversation longer than the token's life used to come back to a fresh room, where a new agent
 * greeted the person from the start. While the room is connected, the page trades its token for the next one at
 * half its life (`POST /api/session/renew`), and tries again every RENEW_RETRY_MS while the service does not
 * answer. A token the service refuses is forgotten (session.ts), and renewing stops until the next session.
 */
import { useEffect } from 'react';

import { renewResume } from './session';

/** How long after a failed renewal (no network, the service or livekit-server not answering) it is tried again. */
export const RENEW_RETRY_MS = 30_000;

/** When to renew a token that lives `ttlS` seconds: at half its life, never sooner than a second from now. */
export function renewAfterMs(ttlS: number): number {
  return Math.max(1_000, (ttlS * 1_000) / 2);
}

/** Renew the stored resume token while `connected`, starting from a token that lives `ttlS` seconds. */
export function useResumeRenewal(connected: boolean, ttlS: number | undefined): void {
  useEffect(() => {
    if (!connected || ttlS === undefined) return;
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const schedule = (ms: number) => {
      timer = setTimeout(() => void renew(), ms);
    };
    const renew = async () => {
      // Not cancelled when the room goes: once the service has spent the old token, the page needs the new one,
      // and a rejoin reads the stored token only after its pause. After Stop nothing is stored (session.ts).
      const result = await renewResume();
      if (!live) return;
      if (result.outcome === 'renewed') schedule(renewAfterMs(result.ttlS));
      else if (result.outcome === 'failed') schedule(RENEW_RETRY_MS);
    };
    schedule(renewAfterMs(ttlS));
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [connected, ttlS]);
}
