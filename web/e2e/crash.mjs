/**
 * livekit-server dies mid-conversation without a word (SIGKILL, an out-of-memory kill) and its supervisor starts it
 * again: Start → the agent greets → the test kills and restarts livekit-server → what the page shows on its own
 * for LEXVOZ_E2E_WATCH_MS (livekit-client's own reconnect: no SERVER_SHUTDOWN reaches it) → a typed question gets
 * sources → Stop.
 *
 * Env: see harness.mjs, plus LEXVOZ_E2E_SIGNAL_FILE (written once the greeting is on the page, when the test kills
 * livekit-server) and LEXVOZ_E2E_WATCH_MS (how long the page is watched before the person asks).
 */
import {
  agentLines,
  agentState,
  askByChat,
  byTestId,
  check,
  greetThenSignal,
  readCards,
  runScenario,
  stopSession,
  waitForCompletedEntry,
} from './harness.mjs';

const QUESTION = '¿cuál es el idioma oficial de panamá?';
const WATCH_MS = Number(process.env.LEXVOZ_E2E_WATCH_MS || 20_000);

await runScenario('browser-e2e-crash', async (page, config) => {
  const { started, before, signalledAt } = await greetThenSignal(page, config, process.env.LEXVOZ_E2E_SIGNAL_FILE);
  // What the page shows on its own while livekit-server is gone and after it is back; then the person asks.
  const seen = [];
  while (Date.now() - signalledAt < WATCH_MS) {
    const error = byTestId(page, 'session-error');
    if (await error.isVisible()) check(false, `the page gave up: ${await error.textContent()}`);
    const notice = byTestId(page, 'session-notice');
    const shown = `${await agentState(page)}|${(await notice.isVisible()) ? await notice.textContent() : ''}`;
    if (seen.at(-1)?.shown !== shown) seen.push({ atMs: Date.now() - signalledAt, shown });
    await page.waitForTimeout(200);
  }
  const line = (await agentLines(page))[before] ?? null;
  await askByChat(page, QUESTION);
  const entry = await waitForCompletedEntry(page, QUESTION, config.timeoutMs);
  const cards = await readCards(entry);
  const linesAfter = (await agentLines(page)).slice(before);
  const stateAfterStop = await stopSession(page);
  return { attempts: started.attempts, line, seen, agentLinesAfter: linesAfter, citations: cards.map((c) => c.citation), stateAfterStop };
});
