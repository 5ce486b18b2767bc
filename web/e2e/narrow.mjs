/**
 * The page on a phone held upright (390 px) with reduced motion asked for, against a real stack in rehearsal
 * mode:
 * Start → no audio visualiser and nothing animating while the agent speaks → a typed question → its sources
 * arrive in the panel below the conversation, out of sight, and a "N fuentes nuevas" notice shows just above
 * the chat box → while the agent reads them back, a second typed question cuts it off: that line is marked
 * "(interrumpido)", and the answer it gave way to is not → pressing the notice scrolls to the newest search
 * and moves focus there → a screenshot (`browser-e2e-narrow.png`; `browser-e2e-narrow-notice.png` is the
 * window as the notice showed) → Stop.
 *
 * Env: see harness.mjs.
 */
import { join } from 'node:path';

import {
  askByChat,
  byTestId,
  check,
  CheckFailed,
  PHONE_VIEWPORT,
  runScenario,
  startSession,
  stopSession,
  transcriptLines,
  waitForAgentReply,
  waitForAgentState,
  waitForCompletedEntry,
} from './harness.mjs';

const FIRST = '¿cuál es el idioma oficial de panamá?';
const SECOND = '¿qué dice la constitución sobre la nacionalidad?';
// The notice follows the search's end within a render; past this it is not coming.
const NOTICE_WITHIN_MS = 5_000;
// How long to look for motion while the agent speaks, and how often.
const MOTION_SAMPLES = 10;
const MOTION_EVERY_MS = 100;

/** Animations running and visualiser bars present, sampled while the agent talks. */
async function motionWhileSpeaking(page, timeoutMs) {
  await waitForAgentState(page, ['hablando'], timeoutMs);
  const samples = [];
  for (let i = 0; i < MOTION_SAMPLES; i += 1) {
    samples.push(
      await page.evaluate(() => ({
        animations: document.getAnimations().filter((a) => a.playState === 'running').length,
        bars: document.querySelectorAll('.lk-audio-bar').length,
      })),
    );
    await page.waitForTimeout(MOTION_EVERY_MS);
  }
  return {
    reduceMatches: await page.evaluate(() => window.matchMedia('(prefers-reduced-motion: reduce)').matches),
    slotDisplay: await page.locator('.visualizer-slot').evaluate((el) => getComputedStyle(el).display),
    maxAnimations: Math.max(...samples.map((s) => s.animations)),
    maxBars: Math.max(...samples.map((s) => s.bars)),
  };
}

/**
 * Where an element is relative to the window: its top and bottom in CSS px, and the window's height; null when
 * the page has no such element (without waiting for one).
 */
async function placement(locator) {
  if ((await locator.count()) === 0) return null;
  return locator.first().evaluate((el) => {
    const r = el.getBoundingClientRect();
    return { top: Math.round(r.top), bottom: Math.round(r.bottom), viewport: window.innerHeight };
  });
}

/**
 * The agent's answer to `question` while it is still being said: the first agent line after the question
 * with some text, and the agent speaking. Returns that text.
 */
async function replyBeingSaid(page, question, timeoutMs) {
  const handle = await page
    .waitForFunction(
      (userText) => {
        const lines = [...document.querySelectorAll('[data-testid="transcript"] li.line')];
        const at = lines.findIndex(
          (li) => li.classList.contains('line-user') && li.querySelector('.line-text')?.textContent === userText,
        );
        const reply = at < 0 ? null : lines.slice(at + 1).find((li) => li.classList.contains('line-agent'));
        const text = reply?.querySelector('.line-text')?.textContent ?? '';
        const state = document.querySelector('[data-testid="agent-state"]')?.textContent;
        return state === 'hablando' && text.trim().length > 0 ? text : null;
      },
      question,
      { timeout: timeoutMs, polling: 50 },
    )
    .catch(() => null);
  if (handle === null) {
    throw new CheckFailed(
      `the agent never started answering "${question}"; transcript: ${JSON.stringify(await transcriptLines(page))}`,
    );
  }
  return handle.jsonValue();
}

await runScenario(
  'browser-e2e-narrow',
  async (page, config) => {
    const started = await startSession(page, config);
    // The greeting: the agent speaks with reduced motion asked for.
    const motion = await motionWhileSpeaking(page, config.timeoutMs);
    await waitForAgentState(page, ['escuchando'], config.timeoutMs);

    // 1. New sources, out of sight below the conversation, are announced near the chat.
    await askByChat(page, FIRST);
    const entry = await waitForCompletedEntry(page, FIRST, config.timeoutMs);
    // Not a hard stop when it never shows: the rest of the run still checks the other promises.
    const notice = byTestId(page, 'new-sources');
    const noticeShown = await notice
      .waitFor({ state: 'visible', timeout: NOTICE_WITHIN_MS })
      .then(() => true)
      .catch(() => false);
    const noticeText = noticeShown ? ((await notice.textContent()) ?? '').replace('↓', '').trim() : null;
    const noticeAt = noticeShown ? await placement(notice) : null;
    const chatAt = await placement(byTestId(page, 'chat-input'));
    const cardsOfFirst = await entry.locator('[data-testid="source-card"]').count();
    // What the person sees at that moment: the window only, the notice under the chat box.
    const noticeScreenshot = join(config.outDir, 'browser-e2e-narrow-notice.png');
    await page.screenshot({ path: noticeScreenshot });
    const listAtNotice = await placement(page.locator('[data-testid="research-panel"] .research-entries'));

    // 2. Cutting the agent off by typing while it reads the sources back.
    const saidBeforeCut = await replyBeingSaid(page, FIRST, config.timeoutMs);
    await askByChat(page, SECOND);
    const secondReply = await waitForAgentReply(page, SECOND, config.timeoutMs);
    const transcript = await transcriptLines(page);
    const firstAt = transcript.findIndex((l) => l.speaker === 'user' && l.text === FIRST);
    const secondAt = transcript.findIndex((l) => l.speaker === 'user' && l.text === SECOND);
    const cutLine = transcript.slice(firstAt + 1, secondAt).find((l) => l.speaker === 'agent') ?? null;
    const cutRole = await page
      .locator('[data-testid="transcript"] li.line-interrupted')
      .first()
      .evaluate((li) => ({ text: li.textContent, hidden: li.closest('[aria-hidden="true"]') !== null }))
      .catch(() => null);

    // 3. Pressing the notice brings the newest search into view and puts the focus on it.
    await waitForCompletedEntry(page, SECOND, config.timeoutMs);
    const unseenCards = await page
      .locator('[data-testid="research-panel"] article.research-entry.is-completed [data-testid="source-card"]')
      .count();
    let noticeTextBeforeTap = null;
    let newestAt = null;
    let focusedQuery = null;
    if (noticeShown) {
      await notice.waitFor({ state: 'visible' });
      noticeTextBeforeTap = ((await notice.textContent()) ?? '').replace('↓', '').trim();
      await notice.click();
      await notice.waitFor({ state: 'hidden' });
      newestAt = await placement(page.locator('[data-testid="research-query"]').first());
      focusedQuery = await page.evaluate(() =>
        document.activeElement?.getAttribute('data-testid') === 'research-query'
          ? document.activeElement.textContent
          : null,
      );
    }
    const pageHeight = await page.evaluate(() => document.documentElement.scrollHeight);

    const screenshot = join(config.outDir, 'browser-e2e-narrow.png');
    await page.screenshot({ path: screenshot, fullPage: true });

    check(cutLine !== null, `no agent line between the two questions: ${JSON.stringify(transcript)}`);
    const stateAfterStop = await stopSession(page);
    return {
      viewport: PHONE_VIEWPORT,
      stateAfterStart: started.state,
      startAttempts: started.attempts,
      motion,
      noticeShown,
      noticeText,
      noticeAt,
      chatAt,
      listAtNotice,
      cardsOfFirst,
      noticeScreenshot,
      saidBeforeCut,
      cutLine,
      cutRole,
      secondReply,
      transcript,
      noticeTextBeforeTap,
      unseenCards,
      newestAt,
      focusedQuery,
      pageHeight,
      screenshot,
      stateAfterStop,
    };
  },
  { viewport: PHONE_VIEWPORT, reducedMotion: 'reduce' },
);
