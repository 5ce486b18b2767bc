/**
 * One whole session as a person has it, against a real stack in rehearsal mode:
 * Start → the agent joins (Spanish state, rehearsal banner) → a spoken turn from the fake microphone →
 * a typed question → source cards from the embedded Constitution with the tool's own time →
 * a screenshot → Stop → back to the Start state.
 *
 * Env: see harness.mjs. LEXVOZ_E2E_QUESTION and LEXVOZ_E2E_EXPECT_CITATION override the typed question
 * and the citation fragment one of its cards must carry.
 */
import { join } from 'node:path';

import {
  agentStatesSeen,
  askByChat,
  byTestId,
  check,
  CheckFailed,
  readCards,
  runScenario,
  startSession,
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
 * keeps the two turns from barging in on each other. Required only when the agent was listening before
 * the burst began; a slower join may miss it, and then the typed question simply goes first.
 */
async function spokenTurn(page, config, readyMs) {
  if (config.toneAtMs === null) return { expected: false, heard: false };
  const expected = readyMs + VOICE_TURN_MARGIN_MS <= config.toneAtMs;
  const spoken = page.locator('[data-testid="transcript"] li.line-user:not(:has(.typed-tag))').first();
  const deadline = Math.max(0, config.toneAtMs + VOICE_TURN_WINDOW_MS - readyMs);
  const heard = await spoken
    .waitFor({ state: 'visible', timeout: deadline })
    .then(() => true)
    .catch(() => false);
  if (!heard) {
    if (expected) {
      throw new CheckFailed(
        `the agent was listening ${readyMs} ms after Start, before the microphone's tone at ${config.toneAtMs} ms, ` +
          `but no spoken turn reached the transcript: ${JSON.stringify(await transcriptLines(page))}`,
      );
    }
    return { expected, heard };
  }
  const text = (await spoken.locator('.line-text').textContent()) ?? '';
  const reply = await waitForAgentReply(page, text, config.timeoutMs);
  return { expected, heard, text, reply };
}

await runScenario('browser-e2e', async (page, config) => {
  const started = await startSession(page, config);

  const banner = byTestId(page, 'rehearsal-banner');
  await banner.waitFor({ state: 'visible' });
  const bannerText = (await banner.textContent()).trim();
  check(/modo de ensayo/i.test(bannerText), `the rehearsal banner says "${bannerText}"`);

  const voice = await spokenTurn(page, config, started.readyMs);

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

  const screenshot = join(config.outDir, 'browser-e2e.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  const transcript = await transcriptLines(page);
  const statesDuringSession = await agentStatesSeen(page);

  const stateAfterStop = await stopSession(page);
  return {
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
