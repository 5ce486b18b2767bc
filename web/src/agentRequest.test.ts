import { act, cleanup, renderHook } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import {
  AGENT_JOINING_MESSAGE,
  AGENT_LOST_REQUEST_AFTER_MS,
  AGENT_REQUEST_AFTER_MS,
  AGENT_REQUEST_TIMEOUT_MS,
  AGENT_UNAVAILABLE_MESSAGE,
  AGENT_WAIT_LIMIT_MS,
  AGENT_WAITING_MESSAGE,
  agentWaitNotice,
  requestAgent,
  retryDelayMs,
  SESSION_INVALID_MESSAGE,
  useAgentRequest,
  type AgentRequestOptions,
} from './agentRequest';

type FetchArgs = [input: RequestInfo | URL, init?: RequestInit];

function answer(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers },
  });
}

const requested = (retry = 5) => answer(202, { agent: 'requested', retry_after_s: retry });

/** A fetch double; by default every request is answered "requested, ask again in 5 s". */
function fakeFetch(impl: (...args: FetchArgs) => Promise<Response> = async () => requested()) {
  return vi.fn(impl);
}

/** A fetch that never answers until aborted, like a server that hangs; it rejects as a browser would. */
function hangingFetch() {
  const signals: AbortSignal[] = [];
  const fn = fakeFetch(
    (_input, init) =>
      new Promise<Response>((_resolve, reject) => {
        const signal = init!.signal!;
        signals.push(signal);
        signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')));
      }),
  );
  return { fn, signals };
}

type Props = Omit<AgentRequestOptions, 'fetchImpl'>;
const WAITING: Props = { token: 'tok-1', connected: true, agentPresent: false, ended: false };

/** Every value the hook returned, with the props of that render. */
let renders: { props: Props; wait: string }[] = [];

function mount(fetchImpl: typeof fetch, initial: Partial<Props> = {}) {
  return renderHook(
    (p: Props) => {
      const wait = useAgentRequest({ ...p, fetchImpl });
      renders.push({ props: p, wait });
      return wait;
    },
    { initialProps: { ...WAITING, ...initial } },
  );
}

/** Advance fake time, letting each request's promise chain (and its state updates) run. */
async function advance(ms: number) {
  await act(async () => {
    await vi.advanceTimersByTimeAsync(ms);
  });
}

beforeEach(() => {
  vi.useFakeTimers();
  renders = [];
});
afterEach(() => {
  cleanup();
  vi.useRealTimers();
});

describe('requestAgent', () => {
  it('POSTs to /api/agent with the join token as a Bearer header and no body', async () => {
    const fetchImpl = fakeFetch();
    await requestAgent('tok-1', new AbortController().signal, fetchImpl);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    const [url, init] = fetchImpl.mock.calls[0]!;
    expect(url).toBe('/api/agent');
    expect(init?.method).toBe('POST');
    expect(new Headers(init?.headers).get('Authorization')).toBe('Bearer tok-1');
    expect(init?.body).toBeUndefined();
    expect(init?.cache).toBe('no-store');
  });

  it.each([
    [answer(200, { agent: 'present', retry_after_s: 5 }), { kind: 'present', retryS: 5 }],
    [answer(202, { agent: 'requested', retry_after_s: 7 }), { kind: 'waiting', retryS: 7 }],
    [answer(202, { agent: 'joining', retry_after_s: 3 }), { kind: 'joining', retryS: 3 }],
    [answer(202, { agent: 'offered', retry_after_s: 3 }), { kind: 'waiting', retryS: 3 }],
    [answer(429, { error: 'x' }, { 'Retry-After': '9' }), { kind: 'waiting', retryS: 9 }],
    [answer(503, { error: 'x' }, { 'Retry-After': '4' }), { kind: 'waiting', retryS: 4 }],
    [answer(503, { error: 'x' }), { kind: 'waiting', retryS: null }],
    [answer(202, 'not an object'), { kind: 'waiting', retryS: null }],
    [answer(401, { error: 'x' }), { kind: 'invalid' }],
    [answer(403, { error: 'x' }), { kind: 'invalid' }],
    [answer(404, { error: 'x' }), { kind: 'invalid' }],
  ])('reads status %#', async (response, expected) => {
    const got = await requestAgent('t', new AbortController().signal, fakeFetch(async () => response));
    expect(got).toEqual(expected);
  });

  it('names an agent seen leaving in a JSON body', async () => {
    const fetchImpl = fakeFetch();
    await requestAgent('tok-1', new AbortController().signal, fetchImpl, 'agent-AJ_1');
    const [, init] = fetchImpl.mock.calls[0]!;
    expect(JSON.parse(String(init?.body))).toEqual({ left: 'agent-AJ_1' });
    expect(new Headers(init?.headers).get('Content-Type')).toBe('application/json');
    expect(new Headers(init?.headers).get('Authorization')).toBe('Bearer tok-1');
  });

  it('turns a network failure into "waiting, same pace" instead of throwing', async () => {
    const got = await requestAgent('t', new AbortController().signal, fakeFetch(async () => Promise.reject(new TypeError('x'))));
    expect(got).toEqual({ kind: 'waiting', retryS: null });
  });
});

describe('retryDelayMs and the notices', () => {
  it('keeps the pace within 2..30 s', () => {
    expect(retryDelayMs(0.1)).toBe(2_000);
    expect(retryDelayMs(5)).toBe(5_000);
    expect(retryDelayMs(3_600)).toBe(30_000);
  });

  it('says in Spanish what is going on, never naming an operator component', () => {
    expect(agentWaitNotice('none')).toBeNull();
    expect(agentWaitNotice('waiting')).toEqual({ text: AGENT_WAITING_MESSAGE, final: false });
    expect(agentWaitNotice('joining')).toEqual({ text: AGENT_JOINING_MESSAGE, final: false });
    expect(agentWaitNotice('unavailable')).toEqual({ text: AGENT_UNAVAILABLE_MESSAGE, final: true });
    expect(agentWaitNotice('invalid')).toEqual({ text: SESSION_INVALID_MESSAGE, final: true });
    for (const text of [AGENT_WAITING_MESSAGE, AGENT_JOINING_MESSAGE, AGENT_UNAVAILABLE_MESSAGE, SESSION_INVALID_MESSAGE]) {
      expect(text).not.toMatch(/worker/i);
    }
  });
});

describe('useAgentRequest', () => {
  it('waits 8.5 s, then sends exactly one request with the session token', async () => {
    expect(AGENT_REQUEST_AFTER_MS).toBe(8_500);
    const fetchImpl = fakeFetch();
    const { result } = mount(fetchImpl);
    await advance(AGENT_REQUEST_AFTER_MS - 1);
    expect(fetchImpl).not.toHaveBeenCalled();
    expect(result.current).toBe('none');
    await advance(1);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    const [url, init] = fetchImpl.mock.calls[0]!;
    expect(url).toBe('/api/agent');
    expect(init?.method).toBe('POST');
    expect(new Headers(init?.headers).get('Authorization')).toBe('Bearer tok-1');
    expect(result.current).toBe('waiting');
  });

  it('says an agent is joining while a worker has taken the room, and that none is free otherwise', async () => {
    const answers = [
      answer(202, { agent: 'joining', retry_after_s: 5 }),
      answer(202, { agent: 'requested', retry_after_s: 5 }),
    ];
    const fetchImpl = fakeFetch(async () => answers.shift() ?? answer(202, { agent: 'requested', retry_after_s: 5 }));
    const { result } = mount(fetchImpl);
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(result.current).toBe('joining');
    await advance(5_000);
    expect(result.current).toBe('waiting');
  });

  it("asks again after the service's retry_after_s, and only then", async () => {
    const fetchImpl = fakeFetch(async () => requested(7));
    mount(fetchImpl);
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    await advance(7_000 - 1);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    await advance(1);
    expect(fetchImpl).toHaveBeenCalledTimes(2);
    await advance(7_000);
    expect(fetchImpl).toHaveBeenCalledTimes(3);
  });

  it('clamps the pace the service names to 2..30 s', async () => {
    const fetchImpl = fakeFetch(async () => requested(0.01));
    mount(fetchImpl);
    await advance(AGENT_REQUEST_AFTER_MS);
    await advance(1_999);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    await advance(1);
    expect(fetchImpl).toHaveBeenCalledTimes(2);

    fetchImpl.mockImplementation(async () => requested(10_000));
    await advance(2_000); // the answer to this one says 10 000 s: 30 s it is
    expect(fetchImpl).toHaveBeenCalledTimes(3);
    await advance(29_999);
    expect(fetchImpl).toHaveBeenCalledTimes(3);
    await advance(1);
    expect(fetchImpl).toHaveBeenCalledTimes(4);
  });

  it('honours Retry-After on 429', async () => {
    const fetchImpl = fakeFetch(async () => answer(429, { error: 'x' }, { 'Retry-After': '12' }));
    const { result } = mount(fetchImpl);
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    expect(result.current).toBe('waiting');
    await advance(12_000 - 1);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    await advance(1);
    expect(fetchImpl).toHaveBeenCalledTimes(2);
  });

  it('keeps asking through 503s and network errors, at the same pace', async () => {
    let call = 0;
    const fetchImpl = fakeFetch(async () => {
      call += 1;
      if (call === 1) return requested(8);
      if (call === 2) throw new TypeError('Failed to fetch');
      return answer(503, { error: 'x' }, { 'Retry-After': '3' });
    });
    const { result } = mount(fetchImpl);
    await advance(AGENT_REQUEST_AFTER_MS);
    await advance(8_000);
    expect(fetchImpl).toHaveBeenCalledTimes(2); // this one failed: still 8 s to the next
    expect(result.current).toBe('waiting');
    await advance(8_000 - 1);
    expect(fetchImpl).toHaveBeenCalledTimes(2);
    await advance(1);
    expect(fetchImpl).toHaveBeenCalledTimes(3); // a 503 saying "3 s"
    await advance(3_000);
    expect(fetchImpl).toHaveBeenCalledTimes(4);
    expect(result.current).toBe('waiting');
  });

  it('abandons a request that hangs and asks again', async () => {
    const { fn, signals } = hangingFetch();
    mount(fn);
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fn).toHaveBeenCalledTimes(1);
    await advance(AGENT_REQUEST_TIMEOUT_MS);
    expect(signals[0]!.aborted).toBe(true);
    await advance(5_000);
    expect(fn).toHaveBeenCalledTimes(2);
  });

  it('an "agent present" answer shows no waiting notice', async () => {
    const fetchImpl = fakeFetch(async () => answer(200, { agent: 'present', retry_after_s: 5 }));
    const { result } = mount(fetchImpl);
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    expect(result.current).toBe('none');
  });

  it('sends nothing while an agent is present, and stops (same render) once one joins', async () => {
    const fetchImpl = fakeFetch();
    const { result, rerender } = mount(fetchImpl, { agentPresent: true });
    await advance(AGENT_WAIT_LIMIT_MS * 2);
    expect(fetchImpl).not.toHaveBeenCalled();
    expect(result.current).toBe('none');

    rerender({ ...WAITING });
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    expect(result.current).toBe('waiting');
    act(() => rerender({ ...WAITING, agentPresent: true }));
    expect(result.current).toBe('none');
    // Not one render showed the notice with the agent there (not even the one before the effects ran).
    expect(renders.filter((r) => r.props.agentPresent).map((r) => r.wait)).not.toContain('waiting');
    await advance(AGENT_WAIT_LIMIT_MS * 2);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    expect(result.current).toBe('none');
  });

  it('sends nothing before the room connects or after it disconnects', async () => {
    const fetchImpl = fakeFetch();
    const { rerender } = mount(fetchImpl, { connected: false });
    await advance(AGENT_REQUEST_AFTER_MS * 3);
    expect(fetchImpl).not.toHaveBeenCalled();

    rerender({ ...WAITING });
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    rerender({ ...WAITING, connected: false });
    await advance(AGENT_WAIT_LIMIT_MS * 2);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
  });

  it('sends nothing after unmount, and aborts the request in flight', async () => {
    const { fn, signals } = hangingFetch();
    const { unmount } = mount(fn);
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fn).toHaveBeenCalledTimes(1);
    unmount();
    expect(signals[0]!.aborted).toBe(true);
    await advance(AGENT_WAIT_LIMIT_MS * 2);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('never asks for another agent once the agent announced the end', async () => {
    const fetchImpl = fakeFetch();
    const { result, rerender } = mount(fetchImpl, { agentPresent: true });
    rerender({ ...WAITING, ended: true }); // said goodbye and left
    await advance(AGENT_WAIT_LIMIT_MS * 2);
    expect(fetchImpl).not.toHaveBeenCalled();
    expect(result.current).toBe('none');
  });

  it('starts over when the agent leaves without announcing an end, asking sooner than for a first agent', async () => {
    expect(AGENT_LOST_REQUEST_AFTER_MS).toBe(3_500);
    const fetchImpl = fakeFetch();
    const { result, rerender } = mount(fetchImpl, { agentPresent: true, agentIdentity: 'agent-AJ_1' });
    await advance(60_000);
    rerender({ ...WAITING }); // its process died
    await advance(AGENT_LOST_REQUEST_AFTER_MS - 1);
    expect(fetchImpl).not.toHaveBeenCalled();
    await advance(1);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    expect(result.current).toBe('waiting');
  });

  it('asks for the first agent of a new session at the first pace, even after losing one in the last session', async () => {
    const fetchImpl = fakeFetch();
    const { rerender } = mount(fetchImpl, { agentPresent: true, agentIdentity: 'agent-AJ_1' });
    await advance(60_000);
    rerender({ ...WAITING, token: 'tok-2' }); // a new session: its room never had an agent
    await advance(AGENT_REQUEST_AFTER_MS - 1);
    expect(fetchImpl).not.toHaveBeenCalled();
    await advance(1);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
  });

  it("names the agent that left when asking for another, and no agent of another session's room", async () => {
    const fetchImpl = fakeFetch();
    const { rerender } = mount(fetchImpl, { agentPresent: true, agentIdentity: 'agent-AJ_1' });
    await advance(60_000);
    rerender({ ...WAITING }); // its worker died: no identity any more, but the page saw which agent it was
    await advance(AGENT_LOST_REQUEST_AFTER_MS);
    expect(JSON.parse(String(fetchImpl.mock.calls[0]![1]?.body))).toEqual({ left: 'agent-AJ_1' });

    rerender({ ...WAITING, token: 'tok-2' }); // a new session, a new room: that agent was never in it
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fetchImpl).toHaveBeenCalledTimes(2);
    expect(fetchImpl.mock.calls[1]![1]?.body).toBeUndefined();
  });

  it.each([401, 403, 404])('stops asking on %i and says the session is no longer valid', async (status) => {
    const fetchImpl = fakeFetch(async () => answer(status, { error: 'x' }));
    const { result } = mount(fetchImpl);
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    expect(result.current).toBe('invalid');
    await advance(AGENT_WAIT_LIMIT_MS * 2);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    expect(result.current).toBe('invalid');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('gives up 10 minutes after the waiting began', async () => {
    expect(AGENT_WAIT_LIMIT_MS).toBe(600_000);
    const fetchImpl = fakeFetch();
    const { result } = mount(fetchImpl);
    await advance(AGENT_WAIT_LIMIT_MS - 1);
    expect(result.current).toBe('waiting');
    // At 8.5 s, then every 5 s until the limit: none is sent at or after 10 min.
    const sent = fetchImpl.mock.calls.length;
    expect(sent).toBe(Math.floor((AGENT_WAIT_LIMIT_MS - 1 - AGENT_REQUEST_AFTER_MS) / 5_000) + 1);
    await advance(1);
    expect(result.current).toBe('unavailable');
    await advance(AGENT_WAIT_LIMIT_MS);
    expect(fetchImpl).toHaveBeenCalledTimes(sent);
    expect(result.current).toBe('unavailable');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('the limit also ends a request left hanging', async () => {
    const { fn, signals } = hangingFetch();
    const { result } = mount(fn);
    await advance(AGENT_WAIT_LIMIT_MS);
    expect(result.current).toBe('unavailable');
    expect(signals.every((s) => s.aborted)).toBe(true);
  });

  it('a new session aborts the old one’s request and timers, and waits its own 5 s', async () => {
    const { fn, signals } = hangingFetch();
    const { result, rerender } = mount(fn);
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fn).toHaveBeenCalledTimes(1);

    rerender({ ...WAITING, token: 'tok-2' });
    expect(signals[0]!.aborted).toBe(true);
    expect(result.current).toBe('none');
    await advance(AGENT_REQUEST_AFTER_MS - 1);
    expect(fn).toHaveBeenCalledTimes(1);
    await advance(1);
    expect(fn).toHaveBeenCalledTimes(2);
    const tokens = fn.mock.calls.map(([, init]) => new Headers(init?.headers).get('Authorization'));
    expect(tokens).toEqual(['Bearer tok-1', 'Bearer tok-2']);
  });

  it("a late answer for the old session changes nothing in the new one", async () => {
    let release!: (r: Response) => void;
    const fetchImpl = fakeFetch(
      () =>
        new Promise<Response>((resolve) => {
          release = resolve; // ignores the abort: answers anyway, later
        }),
    );
    const { result, rerender } = mount(fetchImpl);
    await advance(AGENT_REQUEST_AFTER_MS);
    rerender({ ...WAITING, token: 'tok-2' });
    await act(async () => release(answer(401, { error: 'x' })));
    expect(result.current).toBe('none');
    await advance(AGENT_REQUEST_AFTER_MS);
    expect(fetchImpl).toHaveBeenCalledTimes(2);
  });
});
