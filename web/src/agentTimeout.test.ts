import { act, cleanup, renderHook } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { AGENT_JOIN_TIMEOUT_MS, AGENT_TIMEOUT_MESSAGE, useAgentJoinTimeout } from './agentTimeout';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  cleanup();
  vi.useRealTimers();
});

function render(connected: boolean, agentPresent: boolean) {
  return renderHook((p: { connected: boolean; agentPresent: boolean }) => useAgentJoinTimeout(p.connected, p.agentPresent), {
    initialProps: { connected, agentPresent },
  });
}

describe('useAgentJoinTimeout', () => {
  it('waits 15 s, by default', () => {
    expect(AGENT_JOIN_TIMEOUT_MS).toBe(15_000);
    expect(AGENT_TIMEOUT_MESSAGE).toMatch(/agente no se ha unido/);
  });

  it('reports a timeout when connected and no agent joins within 15 s', () => {
    const { result } = render(true, false);
    expect(result.current).toBe(false);
    act(() => vi.advanceTimersByTime(AGENT_JOIN_TIMEOUT_MS - 1));
    expect(result.current).toBe(false);
    act(() => vi.advanceTimersByTime(1));
    expect(result.current).toBe(true);
  });

  it('does not count the time before the room connected', () => {
    const { result, rerender } = render(false, false);
    act(() => vi.advanceTimersByTime(AGENT_JOIN_TIMEOUT_MS * 2));
    expect(result.current).toBe(false);
    rerender({ connected: true, agentPresent: false });
    act(() => vi.advanceTimersByTime(AGENT_JOIN_TIMEOUT_MS - 1));
    expect(result.current).toBe(false);
    act(() => vi.advanceTimersByTime(1));
    expect(result.current).toBe(true);
  });

  it('never fires when the agent joins in time', () => {
    const { result, rerender } = render(true, false);
    act(() => vi.advanceTimersByTime(5_000));
    rerender({ connected: true, agentPresent: true });
    act(() => vi.advanceTimersByTime(AGENT_JOIN_TIMEOUT_MS * 2));
    expect(result.current).toBe(false);
  });

  it('hides the notice as soon as a late agent joins', () => {
    const { result, rerender } = render(true, false);
    act(() => vi.advanceTimersByTime(AGENT_JOIN_TIMEOUT_MS));
    expect(result.current).toBe(true);
    rerender({ connected: true, agentPresent: true });
    expect(result.current).toBe(false);
  });

  it('starts over if the agent leaves', () => {
    const { result, rerender } = render(true, true);
    rerender({ connected: true, agentPresent: false });
    act(() => vi.advanceTimersByTime(AGENT_JOIN_TIMEOUT_MS - 1));
    expect(result.current).toBe(false);
    act(() => vi.advanceTimersByTime(1));
    expect(result.current).toBe(true);
  });
});
