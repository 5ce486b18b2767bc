/**
 * Shared plumbing for the browser end-to-end scripts: launch Debian's Chromium through playwright-core,
 * drive the page by its data-testid hooks, and report one JSON object on stdout.
 *
 * The scripts are run by tests/e2e/test_browser_e2e.py against a stack it started itself; they read
 * everything they need from the environment so that they never guess a port:
 *   LEXVOZ_E2E_URL    the page (token/page service), e.g. http://127.0.0.1:18884/
 *   LEXVOZ_E2E_OUT    a directory for screenshots (created if missing)
 *   LEXVOZ_E2E_AUDIO  optional WAV file played once as the fake microphone
 *   LEXVOZ_E2E_TONE_AT_MS  optional: where that file's tone burst starts, in ms
 *   LEXVOZ_E2E_TONE_MS  optional: how long the burst lasts, in ms (default 1000)
 *   LEXVOZ_E2E_TIMEOUT_MS  optional cap for each wait (default 30000)
 *
 * Protocol with the caller: the last line of stdout is the JSON result (`ok`, plus what was seen);
 * the exit code is 0 only when every check passed. Diagnostics go to stderr.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';

import { chromium } from 'playwright-core';

// Debian's package, never a downloaded browser build.
export const CHROMIUM = '/usr/bin/chromium';

export const AGENT_READY_STATES = ['escuchando', 'hablando', 'en espera', 'pensando'];

/** A check that failed: the message says what was expected and what the page showed instead. */
export class CheckFailed extends Error {}

export function check(condition, message) {
  if (!condition) throw new CheckFailed(message);
}

export function readConfig() {
  const url = process.env.LEXVOZ_E2E_URL;
  if (!url) throw new CheckFailed('LEXVOZ_E2E_URL is not set');
  const parsed = new URL(url);
  // These scripts only ever talk to a stack on this machine.
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(parsed.hostname)) {
    throw new CheckFailed(`refusing a non-loopback page URL: ${url}`);
  }
  const outDir = resolve(process.env.LEXVOZ_E2E_OUT || 'test-artifacts');
  mkdirSync(outDir, { recursive: true });
  return {
    url,
    outDir,
    audioFile: process.env.LEXVOZ_E2E_AUDIO || null,
    // Where the WAV's tone burst starts, so a scenario knows when a spoken turn is due (null: no burst).
    toneAtMs: process.env.LEXVOZ_E2E_TONE_AT_MS ? Number(process.env.LEXVOZ_E2E_TONE_AT_MS) : null,
    toneMs: Number(process.env.LEXVOZ_E2E_TONE_MS) || 1_000,
    timeoutMs: Number(process.env.LEXVOZ_E2E_TIMEOUT_MS) || 30_000,
  };
}

function chromiumArgs(audioFile) {
  const args = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    // WebRTC to livekit-server on loopback; QUIC and background fetches would only add noise.
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    // Answer the microphone prompt with "allow" and feed a synthetic device instead of hardware.
    '--use-fake-ui-for-media-stream',
    '--use-fake-device-for-media-stream',
    // Nobody clicks "activate audio" here: let the agent's voice play without a user gesture.
    '--autoplay-policy=no-user-gesture-required',
  ];
  // %noloop: play the file once per capture, then silence. Looping would repeat the burst, and every
  // repeat is a new spoken turn that barges in on whatever the scenario is doing at that moment.
  if (audioFile) args.push(`--use-file-for-fake-audio-capture=${audioFile}%noloop`);
  return args;
}

/**
 * Record every value the agent-state element shows, in the page itself: a poll from Node could miss a
 * state that lasts less than its interval (the greeting's "hablando" can be short).
 */
function recordAgentStates() {
  const seen = []; // { state, at }: each state shown and when it began (Date.now(), the scripts' own clock)
  window.__lexvozAgentStates = seen;
  const note = () => {
    const text = document.querySelector('[data-testid="agent-state"]')?.textContent ?? null;
    if (text !== null && seen[seen.length - 1]?.state !== text) seen.push({ state: text, at: Date.now() });
  };
  new MutationObserver(note).observe(document, { subtree: true, childList: true, characterData: true });
  document.addEventListener('DOMContentLoaded', note);
}

/** The desktop window every scenario uses unless it asks for another. */
export const DESKTOP_VIEWPORT = { width: 1280, height: 900 };
/** A phone held upright (an iPhone 12-14's CSS size). */
export const PHONE_VIEWPORT = { width: 390, height: 844 };

/**
 * Launch the browser and open the page; the caller gets the page plus the diagnostics collected on it.
 * `viewport` (default DESKTOP_VIEWPORT) sizes the window; `reducedMotion: 'reduce'` has Chromium report
 * prefers-reduced-motion to the page from the first paint.
 */
export async function openPage(config, { viewport = DESKTOP_VIEWPORT, reducedMotion = 'no-preference' } = {}) {
  // Playwright's launch gives every run a fresh temporary profile (--user-data-dir) and removes it on close.
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: chromiumArgs(config.audioFile),
    timeout: config.timeoutMs,
  });
  const context = await browser.newContext({
    viewport,
    reducedMotion,
    locale: 'es-PA',
    permissions: ['microphone'],
  });
  context.setDefaultTimeout(config.timeoutMs);
  const page = await context.newPage();
  const diagnostics = { consoleErrors: [], pageErrors: [], failedRequests: [] };
  page.on('console', (msg) => {
    if (msg.type() === 'error') diagnostics.consoleErrors.push(msg.text().slice(0, 500));
  });
  page.on('pageerror', (err) => diagnostics.pageErrors.push(String(err.stack || err).slice(0, 1500)));
  page.on('requestfailed', (req) => {
    diagnostics.failedRequests.push(`${req.method()} ${req.url()} ${req.failure()?.errorText ?? ''}`.slice(0, 300));
  });
  await page.addInitScript(recordAgentStates);
  await page.goto(config.url, { waitUntil: 'domcontentloaded' });
  return { browser, page, diagnostics };
}

export const byTestId = (page, id) => page.locator(`[data-testid="${id}"]`);

export async function agentState(page) {
  return (await byTestId(page, 'agent-state').textContent())?.trim() ?? '';
}

export async function agentStatesSeen(page) {
  return (await agentStateLog(page)).map((entry) => entry.state);
}

/** The agent states seen so far, each with the time it began (ms since the epoch). */
export async function agentStateLog(page) {
  return page.evaluate(() => [...(window.__lexvozAgentStates ?? [])]);
}

/** Whether the agent was in `state` at any moment between `from` and `to` (ms since the epoch). */
export function stateDuring(log, state, from, to) {
  return log.some((entry, i) => {
    const ends = i + 1 < log.length ? log[i + 1].at : Infinity;
    return entry.state === state && entry.at < to && ends > from;
  });
}

/** Wait until the agent-state text is one of `states`; the failure names the last state shown. */
export async function waitForAgentState(page, states, timeoutMs) {
  try {
    await page.waitForFunction(
      (wanted) => wanted.includes(document.querySelector('[data-testid="agent-state"]')?.textContent?.trim()),
      states,
      { timeout: timeoutMs },
    );
  } catch {
    throw new CheckFailed(`agent state never became one of ${states.join('/')}; it shows "${await agentState(page)}"`);
  }
  return agentState(page);
}

/**
 * Click Start and wait for the agent to join and settle: the phase every scenario begins with.
 *
 * livekit-server offers a room to the workers once; a worker that refuses it (at its job limit) leaves the
 * room without an agent until the page asks for one again (POST /api/agent, 8.5 s after joining, then at the
 * service's pace; a new offer goes out once the first is 8 s old). So the first attempt waits long enough
 * for that; if no agent comes even so, like a person would, press Stop and Start again, at most `attempts`
 * times; the caller reports how many it took. `readyMs` counts from the last click (at `clickedAt`), which is
 * also when the page opens the (fake) microphone.
 */
export async function startSession(page, config, { attempts = 3, joinTimeoutMs = 30_000, pauseMs = 3_000 } = {}) {
  const refused = [];
  for (let attempt = 1; ; attempt += 1) {
    const before = await agentState(page);
    check(before === 'inactivo', `before Start the agent state is "${before}"`);
    const clickedAt = Date.now();
    await byTestId(page, 'start-button').click();
    await byTestId(page, 'stop-button').waitFor({ state: 'visible' });
    try {
      const state = await waitForAgentState(page, AGENT_READY_STATES, Math.min(joinTimeoutMs, config.timeoutMs));
      return { state, readyMs: Date.now() - clickedAt, clickedAt, attempts: attempt, refused };
    } catch (err) {
      if (!(err instanceof CheckFailed) || attempt >= attempts) throw err;
      refused.push(await agentState(page));
      console.error(`attempt ${attempt}: no agent after ${joinTimeoutMs} ms; Stop and Start again`);
      await byTestId(page, 'stop-button').click();
      await byTestId(page, 'start-button').waitFor({ state: 'visible' });
      await page.waitForTimeout(pauseMs);
    }
  }
}

/** Type a question in the chat box and send it; returns once the typed line is in the transcript. */
export async function askByChat(page, question) {
  const input = byTestId(page, 'chat-input');
  await input.waitFor({ state: 'visible' });
  check(await input.isEnabled(), 'the chat box is disabled during a session');
  await input.fill(question);
  await byTestId(page, 'chat-send').click();
  await page
    .locator('[data-testid="transcript"] li.line-user', { hasText: question })
    .first()
    .waitFor({ state: 'visible' });
}

/**
 * The research entry for `queryFragment`, once it has finished with at least one source card.
 * Scoped to that entry on purpose: a voice turn from the fake microphone can start searches of its own.
 */
export async function waitForCompletedEntry(page, queryFragment, timeoutMs) {
  const entry = page
    .locator('[data-testid="research-panel"] article.research-entry', {
      has: page.locator('[data-testid="research-query"]', { hasText: queryFragment }),
    })
    .first();
  try {
    await entry.locator('[data-testid="source-card"]').first().waitFor({ state: 'visible', timeout: timeoutMs });
  } catch {
    const panel = (await byTestId(page, 'research-panel').innerText()).slice(0, 800);
    throw new CheckFailed(`no source cards for "${queryFragment}" appeared; the research panel shows:\n${panel}`);
  }
  return entry;
}

/**
 * Title (the quiet path line under the heading), citation (the heading) and excerpt of every card in
 * `scope`, as the person reads them (text, not HTML).
 */
export async function readCards(scope) {
  return scope.locator('[data-testid="source-card"]').evaluateAll((cards) =>
    cards.map((card) => ({
      title: card.querySelector('.source-path')?.textContent ?? '',
      citation: card.querySelector('.source-heading')?.textContent ?? '',
      excerpt: card.querySelector('.source-excerpt')?.textContent ?? '',
      text: card.textContent ?? '',
      links: [...card.querySelectorAll('a')].map((a) => a.getAttribute('href')),
    })),
  );
}

export async function transcriptLines(page) {
  return page.locator('[data-testid="transcript"] li.line').evaluateAll((lines) =>
    lines.map((li) => ({
      speaker: li.classList.contains('line-user') ? 'user' : 'agent',
      typed: li.querySelector('.typed-tag') !== null,
      interim: li.classList.contains('line-interim'),
      interrupted: li.querySelector('[data-testid="line-interrupted"]')?.textContent ?? null,
      text: li.querySelector('.line-text')?.textContent ?? '',
    })),
  );
}

/** The agent's finished lines on the page, as their text. */
export async function agentLines(page) {
  return (await transcriptLines(page)).filter((l) => l.speaker === 'agent' && !l.interim).map((l) => l.text.trim());
}

/**
 * Start a session, wait for the agent's greeting and for the agent to listen, then write `signalFile` for the test
 * to break something (it restarts or kills a program) in a conversation at rest: a reply the break cuts mid-word
 * is said again, which tests/e2e/test_room_cut_e2e.py checks. Returns the session's start, the greeting, how many
 * agent lines were on the page then (`before`) and when the signal was written.
 */
export async function greetThenSignal(page, config, signalFile) {
  check(Boolean(signalFile), 'LEXVOZ_E2E_SIGNAL_FILE is not set');
  const started = await startSession(page, config);
  const deadline = Date.now() + config.timeoutMs;
  let greeting;
  while (!(greeting = (await agentLines(page))[0])) {
    check(Date.now() < deadline, 'no greeting on the page');
    await page.waitForTimeout(200);
  }
  await waitForAgentState(page, ['escuchando'], Math.max(deadline - Date.now(), 1));
  const before = (await agentLines(page)).length;
  writeFileSync(signalFile, 'greeted\n');
  return { started, greeting, before, signalledAt: Date.now() };
}

// axe-core from the page's own devDependencies, evaluated in the page through the DevTools protocol
// (which the page's Content-Security-Policy does not restrict, unlike an injected <script>).
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

async function ensureAxe(page) {
  if (!(await page.evaluate(() => typeof window.axe !== 'undefined'))) await page.evaluate(AXE_SOURCE);
}

/**
 * axe-core's violations on the page as it is now (every rule axe runs by default: WCAG A/AA and its best
 * practices), one entry per rule: id, impact, what it checks, and the offending elements with axe's summary.
 */
export async function axeViolations(page) {
  await ensureAxe(page);
  return page.evaluate(async () => {
    const results = await window.axe.run(document, { resultTypes: ['violations'] });
    return results.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${(n.failureSummary ?? '').replace(/\s+/g, ' ').slice(0, 300)}`),
    }));
  });
}

/**
 * The contrast ratio between `element`'s computed `property` colour (e.g. outline-color, border-top-color)
 * and the first opaque background behind it, walking up from `from` ('self' or 'parent'), worked out with
 * axe-core's colour helpers. Returns the ratio and both colours as the browser computed them.
 */
export async function colourContrast(locator, property, from = 'parent') {
  await ensureAxe(locator.page());
  return locator.evaluate(
    (el, [prop, start]) => {
      const { Color, getContrast } = window.axe.commons.color;
      const parse = (text) => {
        const c = new Color();
        c.parseString(text);
        return c;
      };
      const fgText = getComputedStyle(el).getPropertyValue(prop);
      let node = start === 'self' ? el : el.parentElement;
      let bgText = 'rgb(255, 255, 255)';
      for (; node; node = node.parentElement) {
        const bg = getComputedStyle(node).backgroundColor;
        if (parse(bg).alpha === 1) {
          bgText = bg;
          break;
        }
      }
      return { ratio: Math.round(getContrast(parse(bgText), parse(fgText)) * 100) / 100, fg: fgText, bg: bgText };
    },
    [property, from],
  );
}

/**
 * The agent's reply to the user line `afterUserText` (typed or spoken): the first agent line after it,
 * once the agent is listening again, i.e. has finished saying it. `interim` is whether the page still
 * styles that line as in progress.
 */
export async function waitForAgentReply(page, afterUserText, timeoutMs) {
  const handle = await page
    .waitForFunction(
      (userText) => {
        const lines = [...document.querySelectorAll('[data-testid="transcript"] li.line')];
        const start = lines.findIndex(
          (li) => li.classList.contains('line-user') && li.querySelector('.line-text')?.textContent === userText,
        );
        if (start < 0) return null;
        const reply = lines.slice(start + 1).find((li) => li.classList.contains('line-agent'));
        const state = document.querySelector('[data-testid="agent-state"]')?.textContent;
        if (!reply || state !== 'escuchando') return null;
        return {
          text: reply.querySelector('.line-text')?.textContent ?? '',
          interim: reply.classList.contains('line-interim'),
        };
      },
      afterUserText,
      { timeout: timeoutMs },
    )
    .catch(() => null);
  if (handle === null) {
    const lines = await transcriptLines(page);
    throw new CheckFailed(`no finished agent reply after "${afterUserText}"; transcript: ${JSON.stringify(lines)}`);
  }
  // The agent's "listening" can reach the page a moment before the reply's last words do: read the text
  // again until it stops changing (a bounded look, since nothing marks the last chunk).
  let reply = await handle.jsonValue();
  for (let i = 0; i < REPLY_SETTLE_READS; i += 1) {
    await page.waitForTimeout(REPLY_SETTLE_MS);
    const again = await replyAfter(page, afterUserText);
    if (!again || again.text === reply.text) break;
    reply = again;
  }
  return reply;
}

const REPLY_SETTLE_MS = 300;
const REPLY_SETTLE_READS = 10;

/** The first agent line after the user line `userText`, as it reads now (null if there is none). */
async function replyAfter(page, userText) {
  return page.evaluate((text) => {
    const lines = [...document.querySelectorAll('[data-testid="transcript"] li.line')];
    const start = lines.findIndex(
      (li) => li.classList.contains('line-user') && li.querySelector('.line-text')?.textContent === text,
    );
    const reply = start < 0 ? null : lines.slice(start + 1).find((li) => li.classList.contains('line-agent'));
    return reply
      ? { text: reply.querySelector('.line-text')?.textContent ?? '', interim: reply.classList.contains('line-interim') }
      : null;
  }, userText);
}

/** Click Stop and check that the page is back where it started: Start button, no session, chat disabled. */
export async function stopSession(page) {
  await byTestId(page, 'stop-button').click();
  await byTestId(page, 'start-button').waitFor({ state: 'visible' });
  const state = await agentState(page);
  check(state === 'inactivo', `after Stop the agent state is "${state}"`);
  check(await byTestId(page, 'chat-input').isDisabled(), 'after Stop the chat box is still enabled');
  return state;
}

/**
 * Run one scenario: print its JSON result as the last stdout line and exit 0 on success, 1 on a failed
 * check or error. On failure a screenshot named `<name>-failure.png` is left in the output directory.
 * `pageOptions` go to openPage (viewport, reducedMotion).
 */
export async function runScenario(name, scenario, pageOptions = {}) {
  const result = { scenario: name, ok: false };
  let opened = null;
  let config = null;
  try {
    config = readConfig();
    // A failure screenshot from an earlier run would pass for this run's.
    rmSync(join(config.outDir, `${name}-failure.png`), { force: true });
    opened = await openPage(config, pageOptions);
    Object.assign(result, await scenario(opened.page, config));
    result.ok = true;
  } catch (err) {
    result.error = err instanceof CheckFailed ? err.message : String(err?.stack ?? err);
    if (opened && config) {
      const shot = join(config.outDir, `${name}-failure.png`);
      try {
        await opened.page.screenshot({ path: shot, fullPage: true });
        result.failureScreenshot = shot;
        result.agentStates = await agentStatesSeen(opened.page);
      } catch (shotErr) {
        console.error(`could not save the failure screenshot: ${shotErr}`);
      }
    }
  } finally {
    if (opened) {
      Object.assign(result, opened.diagnostics);
      await opened.browser.close().catch((err) => console.error(`closing the browser: ${err}`));
    }
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exitCode = result.ok ? 0 : 1;
}
