/**
 * One whole session as a person has it, against a real stack in rehearsal mode:
 * the first screen (its privacy notice, axe-core, the keyboard focus ring) → Start → the agent joins
 * (Spanish state, rehearsal banner) → a spoken turn from the fake microphone → a typed question → source
 * cards from the embedded Constitution with the tool's own time, announced in one short line → axe-core on
 * the page with cards → a screenshot → Stop → back to the Start state, the cards kept and marked as the
 * previous conversation's, the privacy notice now worded for the mode the agent announced.
 *
 * Env: see harness.mjs. LEXVOZ_E2E_QUESTION and LEXVOZ_E2E_EXPECT_CITATION override the typed question
 * and the citation fragment one of its cards must carry.
 */
import { join } from 'node:path';

import {
  agentStateLog,
  agentStatesSeen,
  askByChat,
  axeViolations,
  byTestId,
  check,
  CheckFailed,
  colourContrast,
  readCards,
  runScenario,
  startSession,
  stateDuring,
  stopSession,
  transcriptLines,
  waitForAgentReply,
  waitForCompletedEntry,
} from './harness.mjs';

const QUESTION = process.env.LEXVOZ_E2E_QUESTION || '¿cuál es el idioma oficial de panamá?';
const EXPECT_CITATION = (process.env.LEXVOZ_E2E_EXPECT_CITATION || 'artículo 7').toLowerCase();
// The panel prints "Tiempo de la herramienta: 123 ms" (or "12,3 s" past ten seconds).
const TOOL_DURATION = /^Tiempo de la herramienta: (\d+ ms|\d+,\d s)$/;
// The burst lasts about a second; the stand-in ends the turn after 500 ms of silence. Past this much
// time after the burst starts, a turn that has not shown up is not coming.
const VOICE_TURN_WINDOW_MS = 8_000;
// The agent has to be listening a little before the burst for the whole of it to reach the stand-in.
const VOICE_TURN_MARGIN_MS = 1_500;

/**
 * The fake microphone's tone burst, heard by the stand-in's energy VAD, becomes a spoken user turn
 * (transcribed as the stand-in's fixed text). Waiting for it, and for the agent's answer, before typing
 * keeps the two turns from barging in on each other. Required when the agent was listening, and not
 * speaking, from a little before the burst to its end: a slower join may miss it, and a burst over the
 * agent's own voice is not reliably heard (the page's microphone runs the browser's echo cancellation; a
 * loaded host once had the agent listening 7.4 s after Start and greeting through a burst at 9 s, and no
 * turn came). Then the typed question simply goes first, and the test says the turn went unchecked.
 */
async function spokenTurn(page, config, started) {
  if (config.toneAtMs === null) return { expected: false, heard: false };
  const spoken = page.locator('[data-testid="transcript"] li.line-user:not(:has(.typed-tag))').first();
  const deadline = Math.max(0, config.toneAtMs + VOICE_TURN_WINDOW_MS - started.readyMs);
  const heard = await spoken
    .waitFor({ state: 'visible', timeout: deadline })
    .then(() => true)
    .catch(() => false);
  const burstFrom = started.clickedAt + config.toneAtMs - VOICE_TURN_MARGIN_MS;
  const burstTo = started.clickedAt + config.toneAtMs + config.toneMs;
  const agentSpoke = stateDuring(await agentStateLog(page), 'hablando', burstFrom, burstTo);
  const expected = started.readyMs + VOICE_TURN_MARGIN_MS <= config.toneAtMs && !agentSpoke;
  if (!heard) {
    if (expected) {
      throw new CheckFailed(
        `the agent was listening ${started.readyMs} ms after Start, before the microphone's tone at ` +
          `${config.toneAtMs} ms, and silent through it, but no spoken turn reached the transcript: ` +
          JSON.stringify(await transcriptLines(page)),
      );
    }
    return { expected, heard, agentSpoke };
  }
  const text = (await spoken.locator('.line-text').textContent()) ?? '';
  const reply = await waitForAgentReply(page, text, config.timeoutMs);
  return { expected, heard, agentSpoke, text, reply };
}

/** The text of the element with this data-testid as it is now, or null when there is none (no waiting). */
async function textNow(page, id) {
  const el = byTestId(page, id);
  return (await el.count()) === 0 ? null : ((await el.first().textContent()) ?? '').trim();
}

/** What the first screen tells and how it reads with a keyboard, before anything else happens. */
async function firstScreen(page) {
  const start = byTestId(page, 'start-button');
  await start.waitFor({ state: 'visible' });
  const privacy = await textNow(page, 'privacy-voice');
  const axe = await axeViolations(page);
  // Keyboard focus, as a person tabbing in sees it: the first Tab lands on «Empezar».
  await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => document.activeElement?.getAttribute('data-testid') ?? null);
  const focusRing = await colourContrast(page.locator(':focus'), 'outline-color');
  const focusRingStyle = await page.locator(':focus').evaluate((el) => getComputedStyle(el).outlineStyle);
  await page.evaluate(() => document.activeElement?.blur());
  return { privacy, axe, focused, focusRing, focusRingStyle };
}

/** Everything inside the research panel that a screen reader would read out as it changes. */
async function liveText(page) {
  return byTestId(page, 'research-panel').evaluate((panel) => {
    const live = '[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"], [role="log"]';
    const regions = [...(panel.matches(live) ? [panel] : []), ...panel.querySelectorAll(live)];
    return regions.map((r) => (r.textContent ?? '').trim());
  });
}

await runScenario('browser-e2e', async (page, config) => {
  const first = await firstScreen(page);
  const started = await startSession(page, config);

  const banner = byTestId(page, 'rehearsal-banner');
  await banner.waitFor({ state: 'visible' });
  const bannerText = (await banner.textContent()).trim();
  check(/modo de ensayo/i.test(bannerText), `the rehearsal banner says "${bannerText}"`);

  const voice = await spokenTurn(page, config, started);

  await askByChat(page, QUESTION);
  const entry = await waitForCompletedEntry(page, QUESTION, config.timeoutMs);
  const cards = await readCards(entry);
  check(
    cards.some((c) => c.citation.toLowerCase().includes(EXPECT_CITATION)),
    `no card cites "${EXPECT_CITATION}"; citations: ${JSON.stringify(cards.map((c) => c.citation))}`,
  );
  const toolDuration = (await entry.locator('[data-testid="tool-duration"]').textContent()).trim();
  check(TOOL_DURATION.test(toolDuration), `the tool duration reads "${toolDuration}"`);

  // The rehearsal "model" answers once the tool result reaches it; waiting for that answer means the
  // screenshot shows the whole exchange, and the caller can check what was said about the sources.
  const reply = await waitForAgentReply(page, QUESTION, config.timeoutMs);

  const announcement = await textNow(page, 'research-announcement');
  const announced = await liveText(page);
  const panelChars = ((await byTestId(page, 'research-panel').textContent()) ?? '').length;
  const axeWithCards = await axeViolations(page);
  const chatBorder = await colourContrast(byTestId(page, 'chat-input'), 'border-top-color');

  const screenshot = join(config.outDir, 'browser-e2e.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  const transcript = await transcriptLines(page);
  const statesDuringSession = await agentStatesSeen(page);

  const cardsBeforeStop = await byTestId(page, 'source-card').count();
  const stateAfterStop = await stopSession(page);
  const stoppedAt = Date.now();
  // After Stop: the cards stay, marked as the previous conversation's; nothing new is announced for them.
  const cardsAfterStop = await byTestId(page, 'source-card').count();
  const ended = byTestId(page, 'research-ended');
  const endedNotice = (await ended.isVisible()) ? ((await ended.textContent()) ?? '').trim() : null;
  const endedStyle = await byTestId(page, 'source-card')
    .first()
    .evaluate((card) => getComputedStyle(card).borderTopStyle);
  const announcedAfterStop = await liveText(page);
  const privacyAfterStop = await textNow(page, 'privacy-voice');
  const axeAfterStop = await axeViolations(page);
  const endedScreenshot = join(config.outDir, 'browser-e2e-ended.png');
  await page.screenshot({ path: endedScreenshot, fullPage: true });
  return {
    firstScreen: first,
    announcement,
    announced,
    panelChars,
    axeWithCards,
    chatBorder,
    stoppedAt,
    cardsBeforeStop,
    cardsAfterStop,
    endedNotice,
    endedStyle,
    announcedAfterStop,
    privacyAfterStop,
    axeAfterStop,
    endedScreenshot,
    question: QUESTION,
    stateAfterStart: started.state,
    readyMs: started.readyMs,
    startAttempts: started.attempts,
    agentStates: statesDuringSession,
    banner: bannerText,
    voice,
    cards,
    toolDuration,
    reply,
    transcript,
    screenshot,
    stateAfterStop,
  };
});
