/**
 * The agent's sign of life, as the page reads it.
 *
 * Why: when the worker behind an agent dies, LiveKit keeps that agent in the room for 15-20 s (its ping
 * timeout), still showing its last state ("hablando"), and the page would neither say it is gone nor ask for
 * another. The agent rewrites its `lexvoz.heartbeat` attribute every few seconds. An agent whose sign of life
 * has not been refreshed for `HEARTBEAT_LOST_MS` is treated as gone: the page shows what it shows when an
 * agent leaves and asks for another, naming this one, and the page service (which checks the age itself
 * before removing anything) takes it out of the room.
 *
 * The time is measured on the page's own clock from when the last refresh ARRIVED (a new value), never by
 * comparing the value, the worker's clock, with the browser's, which may be off by anything. An agent that
 * never sent a sign of life (an older worker) is never judged by it. A refresh that arrives after the limit
 * (a tab that was asleep) brings the agent back at once.
 */
import { useEffect, useState } from 'react';

/** The participant attribute the agent refreshes (agent/voice/heartbeat.py). */
export const HEARTBEAT_ATTRIBUTE = 'lexvoz.heartbeat';
/** No new value for this long: the agent is lost. About three of the agent's 3 s periods, and a margin. */
export const HEARTBEAT_LOST_MS = 10_000;

/**
 * True while the agent `identity`, whose latest sign of life is `beat`, has sent no new one for
 * HEARTBEAT_LOST_MS. False for no agent, or an agent that has sent none.
 */
export function useAgentSilent(identity: string | undefined, beat: string | undefined): boolean {
  // The (agent, value) that went unrefreshed too long; any newer value or another agent no longer matches.
  const [silent, setSilent] = useState<{ identity: string; beat: string } | null>(null);
  useEffect(() => {
    if (!identity || beat === undefined) return;
    const timer = setTimeout(() => setSilent({ identity, beat }), HEARTBEAT_LOST_MS);
    return () => clearTimeout(timer);
  }, [identity, beat]);
  return silent !== null && silent.identity === identity && silent.beat === beat;
}
