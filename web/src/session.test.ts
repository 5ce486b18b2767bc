/**
 * requestSession: the page never names a room, keeps the resume token for a reload in this tab only, and
 * falls back to a fresh session when the service refuses a stale resume token.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { fetchSiteMode, forgetResume, requestSession, SERVICE_FULL_MESSAGE, storedResume } from './session';

function reply(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}

const FRESH = { url: 'ws://127.0.0.1:7880', token: 't1', room: 'lexvoz-a', identity: 'usuario-a', resume: 'r1' };
const AGAIN = { ...FRESH, token: 't2', resume: 'r2' };

let fetchMock: ReturnType<typeof vi.fn>;

function sentBodies(): unknown[] {
  return fetchMock.mock.calls.map(([, init]) => JSON.parse((init as RequestInit).body as string));
}

beforeEach(() => {
  window.sessionStorage.clear();
  fetchMock = vi.fn();
  vi.stubGlobal('fetch', fetchMock);
});

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('requestSession', () => {
  it('asks for a fresh session without naming a room and stores the resume token', async () => {
    fetchMock.mockResolvedValueOnce(reply(FRESH));
    const info = await requestSession();
    expect(info.room).toBe('lexvoz-a');
    expect(sentBodies()).toEqual([{}]);
    expect(storedResume()).toBe('r1');
  });

  it('rejoins with the stored resume token after a reload and keeps the next one', async () => {
    window.sessionStorage.setItem('lexvoz.resume', 'r1');
    fetchMock.mockResolvedValueOnce(reply(AGAIN));
    const info = await requestSession();
    expect(sentBodies()).toEqual([{ resume: 'r1' }]);
    expect(info.room).toBe(FRESH.room);
    expect(storedResume()).toBe('r2');
  });

  it('starts afresh when the resume token is refused (expired or already used)', async () => {
    window.sessionStorage.setItem('lexvoz.resume', 'stale');
    fetchMock.mockResolvedValueOnce(reply({ error: 'la sesión anterior caducó' }, 401));
    fetchMock.mockResolvedValueOnce(reply(FRESH));
    const info = await requestSession();
    expect(sentBodies()).toEqual([{ resume: 'stale' }, {}]);
    expect(info.token).toBe('t1');
    expect(storedResume()).toBe('r1');
  });

  it('says in Spanish that the service is full and to try again in a few minutes', async () => {
    const full = 'Lexvoz está atendiendo a todas las personas que puede. Vuelva a intentarlo en unos minutos.';
    fetchMock.mockResolvedValueOnce(reply({ error: full }, 503));
    await expect(requestSession()).rejects.toThrow(full);
    // A 503 from something else (a proxy's page, no JSON) still says the same, not a bare status code.
    fetchMock.mockResolvedValueOnce(new Response('<html>busy</html>', { status: 503 }));
    await expect(requestSession()).rejects.toThrow(SERVICE_FULL_MESSAGE);
    expect(SERVICE_FULL_MESSAGE).toMatch(/unos minutos/);
  });

  it('forgets the resume token when asked (the person pressed Stop)', () => {
    window.sessionStorage.setItem('lexvoz.resume', 'r1');
    forgetResume();
    expect(storedResume()).toBeNull();
  });
});

describe('fetchSiteMode', () => {
  it('reads the mode the page service runs in, uncached, before any session', async () => {
    fetchMock.mockResolvedValueOnce(reply({ mode: 'rehearsal' }));
    expect(await fetchSiteMode()).toBe('rehearsal');
    const [url, init] = fetchMock.mock.calls[0] ?? [];
    expect(url).toBe('/api/config');
    expect((init as RequestInit).cache).toBe('no-store');
    fetchMock.mockResolvedValueOnce(reply({ mode: 'live' }));
    expect(await fetchSiteMode()).toBe('live');
  });

  it('claims no mode when the service cannot say', async () => {
    fetchMock.mockResolvedValueOnce(reply({ error: 'no' }, 404));
    expect(await fetchSiteMode()).toBeUndefined();
    fetchMock.mockResolvedValueOnce(reply({ mode: 'openai-maybe' }));
    expect(await fetchSiteMode()).toBeUndefined();
    fetchMock.mockRejectedValueOnce(new TypeError('network down'));
    expect(await fetchSiteMode()).toBeUndefined();
  });
});
