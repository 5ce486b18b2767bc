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
const SERVED_WITHIN_MS = Number(process.env.LEXVOZ_E2E_SERVED_WITHIN_MS || 90_000);
// Listening this long after the rejoin without a new line: the agent back is the old one (a new one speaks first).
const SILENT_AGENT_MS = 6_000;

await runScenario('browser-e2e-restart', async (page, config) => {
  const { started, greeting, before, signalledAt } = await greetThenSignal(page, config, process.env.LEXVOZ_E2E_SIGNAL_FILE);

  // What the person reads while the page joins again; the transcript so far stays above the new room's lines.
  // The server's leave can lose the race with its closing socket: then no SERVER_SHUTDOWN reaches the page, which
  // reconnects by itself as after a crash (crash.mjs), with no notice. Either way the person must be served.
  const notice = byTestId(page, 'session-notice');
  let noticeText = null;
  let noticeRole = null;
  try {
    await notice.waitFor({ state: 'visible', timeout: 15_000 });
    noticeText = ((await notice.textContent()) ?? '').trim();
    noticeRole = await notice.getAttribute('role');
  } catch {
    // no shutdown reached the page
  }
  // A new agent says its short line. The old agent may instead come back by itself (its own connection missed the
  // server's leave and reconnected): then it listens and says nothing new, and the test reads the worker's log.
  let line;
  let listeningSince = null;
  while (!(line = (await agentLines(page))[before] ?? null)) {
    const error = byTestId(page, 'session-error');
    if (await error.isVisible()) check(false, `the page gave up: ${await error.textContent()}`);
    check(Date.now() - signalledAt < SERVED_WITHIN_MS, `no agent line within ${SERVED_WITHIN_MS} ms of the restart`);
    const listening = !(await notice.isVisible()) && (await agentState(page)) === 'escuchando';
    listeningSince = listening ? (listeningSince ?? Date.now()) : null;
    if (listeningSince !== null && Date.now() - listeningSince >= SILENT_AGENT_MS) break;
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
