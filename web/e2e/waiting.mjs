/**
 * A person who arrives while every agent is busy: Start → the page says, in Spanish, that no agent is free
 * and that it keeps waiting → once the other conversation ends an agent joins, the notice goes, and a typed
 * question gets sources → Stop.
 *
 * Env: see harness.mjs, plus LEXVOZ_E2E_SIGNAL_FILE: this script writes it once the waiting notice shows,
 * which is when the test ends the conversation that holds the only agent. LEXVOZ_E2E_SERVED_WITHIN_MS bounds
 * the wait for an agent after that.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import {
  AGENT_READY_STATES,
  agentState,
  askByChat,
  byTestId,
  check,
  readCards,
  runScenario,
  stopSession,
  waitForAgentState,
  waitForCompletedEntry,
} from './harness.mjs';

const QUESTION = '¿cuál es el idioma oficial de panamá?';
const SIGNAL_FILE = process.env.LEXVOZ_E2E_SIGNAL_FILE;
const SERVED_WITHIN_MS = Number(process.env.LEXVOZ_E2E_SERVED_WITHIN_MS || 120_000);
// The page asks for an agent 5 s after joining and shows the notice on the answer.
const NOTICE_WITHIN_MS = 30_000;

await runScenario('browser-e2e-waiting', async (page, config) => {
  check(Boolean(SIGNAL_FILE), 'LEXVOZ_E2E_SIGNAL_FILE is not set');
  await byTestId(page, 'start-button').click();
  await byTestId(page, 'stop-button').waitFor({ state: 'visible' });

  const waiting = byTestId(page, 'agent-waiting');
  await waiting.waitFor({ state: 'visible', timeout: NOTICE_WITHIN_MS });
  const waitingText = ((await waiting.textContent()) ?? '').trim();
  const waitingRole = await waiting.getAttribute('role');
  const stateWhileWaiting = await agentState(page);
  const waitingShot = join(config.outDir, 'browser-e2e-waiting.png');
  await page.screenshot({ path: waitingShot, fullPage: true });
  writeFileSync(SIGNAL_FILE, 'waiting\n');
  const signalledAt = Date.now();

  const state = await waitForAgentState(page, AGENT_READY_STATES, SERVED_WITHIN_MS);
  const servedAfterMs = Date.now() - signalledAt;
  const noticeAfterJoin = await waiting.isVisible();
  const gaveUp = await byTestId(page, 'agent-timeout').isVisible();

  await askByChat(page, QUESTION);
  const entry = await waitForCompletedEntry(page, QUESTION, config.timeoutMs);
  const cards = await readCards(entry);
  const stateAfterStop = await stopSession(page);
  return {
    waitingText,
    waitingRole,
    stateWhileWaiting,
    waitingShot,
    state,
    servedAfterMs,
    noticeAfterJoin,
    gaveUp,
    citations: cards.map((c) => c.citation),
    stateAfterStop,
  };
});
