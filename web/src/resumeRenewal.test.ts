/**
 * Renewing the resume token: what each answer of POST /api/session/renew does to the token this tab holds, and
 * when the hook asks (at half the token's life, again after a failure, never once the room is gone). The App-level
 * journey (a long conversation rejoining its own room) is in App.rejoin.test.tsx.
 */
import { act, renderHook } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { RENEW_RETRY_MS, renewAfterMs, useResumeRenewal } from './resumeRenewal';
import { forgetResume, renewResume, requestSession, storedResume } from './session';

function reply(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}

let fetchMock: ReturnType<typeof vi.fn<(input: RequestInfo | URL, init?: RequestInit) => Promise<Response>>>;

function renewedWith(): (string | undefined)[] {
  return fetchMock.mock.calls
    .filter(([url]) => url === '/api/session/renew')
    .map(([, init]) => (JSON.parse(String(init?.body ?? '{}')) as { resume?: string }).resume);
}

beforeEach(() => {
  window.sessionStorage.clear();
  fetchMock = vi.fn();
  vi.stubGlobal('fetch', fetchMock);
});

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

async function holding(token: string, ttl = 600): Promise<void> {
  fetchMock.mockResolvedValueOnce(
    reply({ url: 'ws://127.0.0.1:7880', token: 't', room: 'lexvoz-a', identity: 'usuario-a', resume: token, resume_ttl_s: ttl }),
  );
  const info = await requestSession();
  expect(info.resume_ttl_s).toBe(ttl);
  fetchMock.mockClear();
}

describe('renewResume', () => {
  it('stores the next token and says how long it lives', async () => {
    await holding('r1');
    fetchMock.mockResolvedValueOnce(reply({ resume: 'r2', resume_ttl_s: 300 }));
    expect(await renewResume()).toEqual({ outcome: 'renewed', ttlS: 300 });
    expect(renewedWith()).toEqual(['r1']);
    expect(storedResume()).toBe('r2');
  });

  it('forgets a token the service refuses (expired, spent, not ours)', async () => {
    for (const status of [401, 400]) {
      await holding('r1');
      fetchMock.mockResolvedValueOnce(reply({ error: 'la sesión anterior caducó' }, status));
      expect(await renewResume()).toEqual({ outcome: 'refused' });
      expect(storedResume()).toBeNull();
    }
  });

  it('keeps the token for a later try when the service, livekit-server or the network does not answer', async () => {
    const answers: (() => Promise<Response>)[] = [
      async () => reply({ error: 'no se pudo contactar con el servidor de salas' }, 503),
      async () => reply({ error: 'usted no está en la sala' }, 404),
      async () => reply({ error: 'demasiadas solicitudes' }, 429),
      async () => new Response('<html>bad gateway</html>', { status: 502 }),
      async () => reply({ resume: 'r2' }), // no lifetime: not an answer of ours
      async () => {
        throw new TypeError('Failed to fetch');
      },
    ];
    for (const answer of answers) {
      await holding('r1');
      fetchMock.mockImplementationOnce(answer);
      expect(await renewResume()).toEqual({ outcome: 'failed' });
      expect(storedResume()).toBe('r1');
    }
  });

  it('leaves alone a token a rejoin stored while the renewal was out', async () => {
    await holding('r1');
    fetchMock.mockImplementationOnce(async () => {
      window.sessionStorage.setItem('lexvoz.resume', 'from-rejoin');
      return reply({ resume: 'r2', resume_ttl_s: 600 });
    });
    expect(await renewResume()).toEqual({ outcome: 'failed' });
    expect(storedResume()).toBe('from-rejoin');
  });

  it('asks nothing when the tab holds no token', async () => {
    expect(await renewResume()).toEqual({ outcome: 'refused' });
    expect(fetchMock).not.toHaveBeenCalled();
  });
});

/** A fetch that answers when the test says, and is abandoned, as a browser's is, when its signal aborts. */
function pendingFetch(hold: (resolve: (response: Response) => void) => void) {
  return (_url: RequestInfo | URL, init?: RequestInit) =>
    new Promise<Response>((resolve, reject) => {
      hold(resolve);
      init?.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')));
    });
}

describe('useResumeRenewal', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });

  async function advance(ms: number) {
    await act(async () => {
      await vi.advanceTimersByTimeAsync(ms);
    });
  }

  it('renews at half the life of each token it holds', async () => {
    await holding('r1', 600);
    fetchMock.mockResolvedValueOnce(reply({ resume: 'r2', resume_ttl_s: 120 }));
    fetchMock.mockResolvedValueOnce(reply({ resume: 'r3', resume_ttl_s: 120 }));
    renderHook(() => useResumeRenewal(true, 600));
    await advance(renewAfterMs(600) - 1);
    expect(renewedWith()).toEqual([]);
    await advance(1);
    expect(renewedWith()).toEqual(['r1']);
    await advance(renewAfterMs(120));
    expect(renewedWith()).toEqual(['r1', 'r2']);
    expect(storedResume()).toBe('r3');
  });

  it('tries again after a failure, and stops once the service refuses the token', async () => {
    await holding('r1', 600);
    fetchMock.mockResolvedValueOnce(reply({ error: 'no se pudo contactar con el servidor de salas' }, 503));
    fetchMock.mockResolvedValueOnce(reply({ error: 'esta sesión ya se reanudó' }, 401));
    renderHook(() => useResumeRenewal(true, 600));
    await advance(renewAfterMs(600));
    await advance(RENEW_RETRY_MS);
    expect(renewedWith()).toEqual(['r1', 'r1']);
    await advance(10 * RENEW_RETRY_MS);
    expect(renewedWith()).toHaveLength(2);
  });

  it('stops when the room is no longer connected', async () => {
    await holding('r1', 600);
    const { rerender } = renderHook(({ connected }) => useResumeRenewal(connected, 600), {
      initialProps: { connected: true },
    });
    await advance(renewAfterMs(600) / 2);
    rerender({ connected: false });
    await advance(10 * renewAfterMs(600));
    expect(renewedWith()).toEqual([]);
  });

  it('stores the token of a renewal that was out when the room went (the old one is spent), and asks no more', async () => {
    await holding('r1', 600);
    let answer: (response: Response) => void = () => undefined;
    fetchMock.mockImplementationOnce(pendingFetch((resolve) => (answer = resolve)));
    const { rerender } = renderHook(({ connected }) => useResumeRenewal(connected, 600), {
      initialProps: { connected: true },
    });
    await advance(renewAfterMs(600));
    expect(renewedWith()).toEqual(['r1']);
    rerender({ connected: false }); // livekit-server shut down: the page is about to rejoin
    await act(async () => answer(reply({ resume: 'r2', resume_ttl_s: 600 })));
    expect(storedResume()).toBe('r2'); // what the rejoin will present
    await advance(10 * renewAfterMs(600));
    expect(renewedWith()).toEqual(['r1']);
  });

  it('stores nothing from a renewal answered after Stop', async () => {
    await holding('r1', 600);
    let answer: (response: Response) => void = () => undefined;
    fetchMock.mockImplementationOnce(pendingFetch((resolve) => (answer = resolve)));
    const { unmount } = renderHook(() => useResumeRenewal(true, 600));
    await advance(renewAfterMs(600));
    unmount();
    forgetResume(); // what Stop does
    await act(async () => answer(reply({ resume: 'r2', resume_ttl_s: 600 })));
    expect(storedResume()).toBeNull();
  });

  it('never renews sooner than a second, whatever lifetime it is told', () => {
    expect(renewAfterMs(0.5)).toBe(1_000);
    expect(renewAfterMs(600)).toBe(300_000);
  });
});
