/** Notice when the room is up but no agent has joined it (e.g. the worker refused or never got the job). */
import { useEffect, useState } from 'react';

export const AGENT_JOIN_TIMEOUT_MS = 15_000;

export const AGENT_TIMEOUT_MESSAGE =
  'El agente no se ha unido a la sala. Compruebe que el worker esté en marcha e intente de nuevo.';

/**
 * True once the room has been connected for `timeoutMs` without an agent participant in it; false again as
 * soon as an agent is present (the session stays usable, so a late agent just clears the notice). If the
 * agent leaves, the countdown starts over.
 */
export function useAgentJoinTimeout(
  connected: boolean,
  agentPresent: boolean,
  timeoutMs: number = AGENT_JOIN_TIMEOUT_MS,
): boolean {
  const waiting = connected && !agentPresent;
  const [expired, setExpired] = useState(false);

  useEffect(() => {
    setExpired(false);
    if (!waiting) return;
    const timer = setTimeout(() => setExpired(true), timeoutMs);
    return () => clearTimeout(timer);
  }, [waiting, timeoutMs]);

  // `waiting` is checked here too so the notice goes the very render the agent appears.
  return waiting && expired;
}
