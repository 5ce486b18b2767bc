/**
 * useAgentSilent: an agent is lost when its sign of life has not been refreshed for HEARTBEAT_LOST_MS on the
 * page's own clock, counted from when the last value arrived; an agent that never sent one is never judged.
 */
import { act, cleanup, renderHook } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { HEARTBEAT_LOST_MS, useAgentSilent } from './heartbeat';

interface Props {
  identity: string | undefined;
  beat: string | undefined;
}

function mount(initial: Props) {
  return renderHook((p: Props) => useAgentSilent(p.identity, p.beat), { initialProps: initial });
}

async function advance(ms: number) {
  await act(async () => {
    await vi.advanceTimersByTimeAsync(ms);
  });
}

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  cleanup();
  vi.useRealTimers();
});

describe('useAgentSilent', () => {
  it('judges an agent lost once no refresh has arrived for the limit, not a moment before', async () => {
    const hook = mount({ identity: 'agente', beat: '1800000000000' });
    await advance(HEARTBEAT_LOST_MS - 1);
    expect(hook.result.current).toBe(false);
    await advance(1);
    expect(hook.result.current).toBe(true);
  });

  it('keeps an agent whose refreshes arrive in time, however long the conversation', async () => {
    const hook = mount({ identity: 'agente', beat: '0' });
    for (let i = 1; i <= 100; i++) {
      await advance(HEARTBEAT_LOST_MS - 1); // each refresh late, but within the limit
      hook.rerender({ identity: 'agente', beat: String(i * 3_000) });
      expect(hook.result.current).toBe(false);
    }
  });

  it('never judges an agent that has never sent a sign of life (an older worker), nor no agent', async () => {
    const older = mount({ identity: 'agente', beat: undefined });
    const none = mount({ identity: undefined, beat: undefined });
    await advance(30 * 60_000);
    expect(older.result.current).toBe(false);
    expect(none.result.current).toBe(false);
  });

  it("counts from the arrival on the page's clock, never from the value's time", async () => {
    // The worker's clock an hour behind the browser's, then an hour ahead: neither changes the verdict.
    vi.setSystemTime(new Date('2026-12-02T15:00:00Z'));
    const hook = mount({ identity: 'agente', beat: String(Date.parse('2026-12-02T14:00:00Z')) });
    await advance(HEARTBEAT_LOST_MS - 1);
    expect(hook.result.current).toBe(false);
    hook.rerender({ identity: 'agente', beat: String(Date.parse('2026-12-02T16:00:00Z')) });
    await advance(HEARTBEAT_LOST_MS - 1);
    expect(hook.result.current).toBe(false);
    await advance(1);
    expect(hook.result.current).toBe(true);
  });

  it('brings a lost agent back the moment a new refresh arrives (a tab that slept, a slow link)', async () => {
    const hook = mount({ identity: 'agente', beat: '1' });
    await advance(HEARTBEAT_LOST_MS);
    expect(hook.result.current).toBe(true);
    hook.rerender({ identity: 'agente', beat: '2' });
    expect(hook.result.current).toBe(false);
    await advance(HEARTBEAT_LOST_MS);
    expect(hook.result.current).toBe(true);
  });

  it('judges each agent on its own: a new agent starts with a clean slate', async () => {
    const hook = mount({ identity: 'agente-1', beat: '5' });
    await advance(HEARTBEAT_LOST_MS);
    expect(hook.result.current).toBe(true);
    hook.rerender({ identity: 'agente-2', beat: '5' }); // same value, another agent
    expect(hook.result.current).toBe(false);
    hook.rerender({ identity: 'agente-3', beat: undefined }); // an older worker's agent
    await advance(HEARTBEAT_LOST_MS * 3);
    expect(hook.result.current).toBe(false);
  });
});
