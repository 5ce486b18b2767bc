import { agentWaitNotice, type AgentWait } from './agentRequest';

/**
 * What the person reads while no agent has joined: a status while the page keeps asking for one (the
 * session stays usable meanwhile), an alert once it has given up. Plain React text, never HTML.
 */
export function AgentWaitNotice({ wait }: { wait: AgentWait }) {
  const notice = agentWaitNotice(wait);
  if (!notice) return null;
  return notice.final ? (
    <p className="agent-timeout" data-testid="agent-timeout" role="alert">
      {notice.text}
    </p>
  ) : (
    <p className="agent-waiting" data-testid="agent-waiting" role="status">
      {notice.text}
    </p>
  );
}
