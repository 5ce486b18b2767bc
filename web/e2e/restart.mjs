/**
 * livekit-server restarts mid-conversation (an upgrade, a crash that its supervisor restarts): Start → the agent
 * greets → the test restarts livekit-server → the page says it is reconnecting, joins the same room again by
 * itself, keeps the transcript so far, and the new agent says its short line, not the greeting → a typed question
 * gets sources → Stop.
 *
 * Env: see harness.mjs, plus LEXVOZ_E2E_SIGNAL_FILE: written once the greeting is on the page, which is when the
 * test restarts livekit-server. LEXVOZ_E2E_SERVED_WITHIN_MS bounds the wait for the new agent's line after that.
 */
import {
  agentLines,
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
const SERVED_WITHIN_MS = Number(process.env.LEXVOZ_E2E_SERVED_WITHIN_MS || 90_000);

await runScenario('browser-e2e-restart', async (page, config) => {
  const { started, greeting, before, signalledAt } = await greetThenSignal(page, config, process.env.LEXVOZ_E2E_SIGNAL_FILE);

  // What the person reads while the page joins again; the transcript so far stays above the new room's lines.
  const notice = byTestId(page, 'session-notice');
  await notice.waitFor({ state: 'visible', timeout: 15_000 });
  const noticeText = ((await notice.textContent()) ?? '').trim();
  const noticeRole = await notice.getAttribute('role');
  let line;
  while (!(line = (await agentLines(page))[before])) {
    const error = byTestId(page, 'session-error');
    if (await error.isVisible()) check(false, `the page gave up: ${await error.textContent()}`);
    check(Date.now() - signalledAt < SERVED_WITHIN_MS, `no agent line within ${SERVED_WITHIN_MS} ms of the restart`);
    await page.waitForTimeout(200);
  }
  const resumedAfterMs = Date.now() - signalledAt;
  const noticeAfter = await notice.isVisible();
  const kept = (await agentLines(page)).slice(0, before);

  await askByChat(page, QUESTION);
  const entry = await waitForCompletedEntry(page, QUESTION, config.timeoutMs);
  const cards = await readCards(entry);
  const linesAfter = (await agentLines(page)).slice(before);
  const stateAfterStop = await stopSession(page);
  return {
    attempts: started.attempts,
    greeting,
    noticeText,
    noticeRole,
    line,
    resumedAfterMs,
    noticeAfter,
    kept,
    agentLinesAfter: linesAfter,
    citations: cards.map((c) => c.citation),
    stateAfterStop,
  };
});
