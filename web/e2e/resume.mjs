/**
 * A person whose agent is lost mid-conversation: Start → the agent greets → the test kills the process that runs
 * the agent → the page notices its sign of life stopped, asks for another agent, and tells the new one (its
 * hello) that this person was already greeted → the new agent says its short line, not the greeting again → a
 * typed question gets sources → Stop.
 *
 * Env: see harness.mjs, plus LEXVOZ_E2E_SIGNAL_FILE: this script writes it once the greeting is on the page,
 * which is when the test kills the agent's process. LEXVOZ_E2E_SERVED_WITHIN_MS bounds the wait for the new agent's
 * line after that. LEXVOZ_E2E_RESUME_LINE: the line the new agent must say.
 */
import { writeFileSync } from 'node:fs';

import {
  askByChat,
  check,
  readCards,
  runScenario,
  startSession,
  stopSession,
  transcriptLines,
  waitForCompletedEntry,
} from './harness.mjs';

const QUESTION = '¿cuál es el idioma oficial de panamá?';
const SIGNAL_FILE = process.env.LEXVOZ_E2E_SIGNAL_FILE;
const RESUME_LINE = process.env.LEXVOZ_E2E_RESUME_LINE;
const SERVED_WITHIN_MS = Number(process.env.LEXVOZ_E2E_SERVED_WITHIN_MS || 90_000);

const agentLines = async (page) =>
  (await transcriptLines(page)).filter((l) => l.speaker === 'agent' && !l.interim).map((l) => l.text.trim());

async function waitForAgentLines(page, count, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = await agentLines(page);
    if (lines.length >= count) return lines;
    check(Date.now() < deadline, `${count} agent lines expected within ${timeoutMs} ms; the page shows ${JSON.stringify(lines)}`);
    await page.waitForTimeout(200);
  }
}

await runScenario('browser-e2e-resume', async (page, config) => {
  check(Boolean(SIGNAL_FILE) && Boolean(RESUME_LINE), 'LEXVOZ_E2E_SIGNAL_FILE or LEXVOZ_E2E_RESUME_LINE is not set');
  const started = await startSession(page, config);
  const [greeting] = await waitForAgentLines(page, 1, config.timeoutMs);
  writeFileSync(SIGNAL_FILE, 'greeted\n');
  const signalledAt = Date.now();

  const lines = await waitForAgentLines(page, 2, SERVED_WITHIN_MS);
  const resumedAfterMs = Date.now() - signalledAt;
  await askByChat(page, QUESTION);
  const entry = await waitForCompletedEntry(page, QUESTION, config.timeoutMs);
  const cards = await readCards(entry);
  const allLines = await agentLines(page);
  const stateAfterStop = await stopSession(page);
  return {
    attempts: started.attempts,
    greeting,
    secondLine: lines[1],
    agentLines: allLines,
    resumedAfterMs,
    citations: cards.map((c) => c.citation),
    stateAfterStop,
  };
});
