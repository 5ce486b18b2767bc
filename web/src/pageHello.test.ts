/**
 * usePageHello: each new agent gets one hello, only once the room is connected, saying whether an agent has
 * already spoken to this person in this room (this tab, reloads included); a new room starts afresh.
 */
import { cleanup, renderHook } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { greetedIn, usePageHello, type SendHello } from './pageHello';

interface Props {
  room: string;
  connected: boolean;
  agentIdentity: string | undefined;
  agentSpoke: boolean;
}

function mount(initial: Props, send: SendHello) {
  return renderHook((p: Props) => usePageHello({ ...p, send }), { initialProps: initial });
}

function hellos(send: ReturnType<typeof vi.fn>): { to: string; resumed: boolean }[] {
  return send.mock.calls.map(([payload, to]) => {
    const hello = JSON.parse(new TextDecoder().decode(payload as Uint8Array)) as Record<string, unknown>;
    expect(Object.keys(hello).sort()).toEqual(['resumed', 'type', 'v']);
    expect(hello.v).toBe(1);
    expect(hello.type).toBe('hello');
    return { to: to as string, resumed: hello.resumed as boolean };
  });
}

beforeEach(() => {
  window.sessionStorage.clear();
});

afterEach(() => {
  cleanup();
});

describe('usePageHello', () => {
  it('tells the first agent the person is new, and the next agent in the same room that they were greeted', () => {
    const send = vi.fn(async () => undefined);
    const view = mount({ room: 'sala-1', connected: true, agentIdentity: 'agente-1', agentSpoke: false }, send);
    view.rerender({ room: 'sala-1', connected: true, agentIdentity: 'agente-1', agentSpoke: true });
    // the agent's worker died: it is gone, and another joins the same room
    view.rerender({ room: 'sala-1', connected: true, agentIdentity: undefined, agentSpoke: true });
    view.rerender({ room: 'sala-1', connected: true, agentIdentity: 'agente-2', agentSpoke: true });
    expect(hellos(send)).toEqual([
      { to: 'agente-1', resumed: false },
      { to: 'agente-2', resumed: true },
    ]);
  });

  it('counts an agent that joined but never spoke as no greeting', () => {
    const send = vi.fn(async () => undefined);
    const view = mount({ room: 'sala-1', connected: true, agentIdentity: 'agente-1', agentSpoke: false }, send);
    view.rerender({ room: 'sala-1', connected: true, agentIdentity: 'agente-2', agentSpoke: false });
    expect(hellos(send).map((h) => h.resumed)).toEqual([false, false]);
  });

  it('sends nothing while the room is not connected, and one hello per agent however often it renders', () => {
    const send = vi.fn(async () => undefined);
    const view = mount({ room: 'sala-1', connected: false, agentIdentity: 'agente-1', agentSpoke: false }, send);
    expect(send).not.toHaveBeenCalled();
    view.rerender({ room: 'sala-1', connected: true, agentIdentity: 'agente-1', agentSpoke: false });
    view.rerender({ room: 'sala-1', connected: false, agentIdentity: 'agente-1', agentSpoke: false });
    view.rerender({ room: 'sala-1', connected: true, agentIdentity: 'agente-1', agentSpoke: false });
    expect(hellos(send)).toEqual([{ to: 'agente-1', resumed: false }]);
  });

  it('remembers across a reload of the same room, and a new room starts afresh', () => {
    const send = vi.fn(async () => undefined);
    const first = mount({ room: 'sala-1', connected: true, agentIdentity: 'agente-1', agentSpoke: false }, send);
    expect(greetedIn('sala-1')).toBe(false);
    first.rerender({ room: 'sala-1', connected: true, agentIdentity: 'agente-1', agentSpoke: true });
    first.unmount();
    expect(greetedIn('sala-1')).toBe(true);
    mount({ room: 'sala-1', connected: true, agentIdentity: 'agente-2', agentSpoke: false }, send); // reloaded
    mount({ room: 'sala-2', connected: true, agentIdentity: 'agente-3', agentSpoke: false }, send); // a new session
    expect(hellos(send)).toEqual([
      { to: 'agente-1', resumed: false },
      { to: 'agente-2', resumed: true },
      { to: 'agente-3', resumed: false },
    ]);
  });

  it('survives a hello that could not be sent', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    const send = vi.fn(async () => {
      throw new Error('not connected');
    });
    mount({ room: 'sala-1', connected: true, agentIdentity: 'agente-1', agentSpoke: false }, send);
    await vi.waitFor(() => expect(warn).toHaveBeenCalled());
    warn.mockRestore();
  });
});
