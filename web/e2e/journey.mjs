/**
 * A new user's first hour, the browser's part, against the stack `make run` started
 * (tests/journey/test_first_hour.py runs both):
 * Start → a typed question about the Constitution → its source cards → hand over to the test, which imports a
 * second law while this page stays open → a typed question about that law → a card citing it, with no restart
 * of anything → a screenshot → Stop.
 *
 * Env: see harness.mjs, plus
 *   LEXVOZ_E2E_QUESTION / LEXVOZ_E2E_EXPECT_CITATION              the first question and a fragment of its cards
 *   LEXVOZ_E2E_LAW_QUESTION / LEXVOZ_E2E_LAW_EXPECT_CITATION      the same for the law imported mid-session
 *
 * The hand-over: once the first answer is in, the script prints the line {"step":"import"} and waits for one
 * line on stdin (whatever it says) before it asks the second question. Its last stdout line is the result.
 */
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import {
  askByChat,
  check,
  readCards,
  runScenario,
  startSession,
  stopSession,
  waitForAgentReply,
  waitForCompletedEntry,
} from './harness.mjs';

const QUESTION = process.env.LEXVOZ_E2E_QUESTION || '¿cuál es el idioma oficial de panamá?';
const EXPECT_CITATION = (process.env.LEXVOZ_E2E_EXPECT_CITATION || 'artículo 7').toLowerCase();
const LAW_QUESTION = process.env.LEXVOZ_E2E_LAW_QUESTION || '';
const LAW_EXPECT_CITATION = (process.env.LEXVOZ_E2E_LAW_EXPECT_CITATION || '').toLowerCase();

/** The next line on stdin: the caller's word that the law has been imported. */
function nextStdinLine() {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: process.stdin });
    lines.once('line', (line) => {
      resolve(line); // first: closing emits 'close' at once, and a settled promise ignores the reject
      lines.close();
      process.stdin.destroy(); // nothing more will come; an open stdin would keep Node alive after the result
    });
    lines.once('close', () => reject(new Error('stdin closed before the import was done')));
  });
}

/** Ask by chat and return the cards of that question's research entry once they are in, and the agent's reply. */
async function askAndRead(page, config, question) {
  await askByChat(page, question);
  const entry = await waitForCompletedEntry(page, question, config.timeoutMs);
  const cards = await readCards(entry);
  const reply = await waitForAgentReply(page, question, config.timeoutMs);
  return { cards, reply };
}

await runScenario('journey', async (page, config) => {
  check(LAW_QUESTION && LAW_EXPECT_CITATION, 'LEXVOZ_E2E_LAW_QUESTION and LEXVOZ_E2E_LAW_EXPECT_CITATION are required');
  const started = await startSession(page, config);

  const first = await askAndRead(page, config, QUESTION);
  check(
    first.cards.some((c) => c.citation.toLowerCase().includes(EXPECT_CITATION)),
    `no card cites "${EXPECT_CITATION}"; citations: ${JSON.stringify(first.cards.map((c) => c.citation))}`,
  );

  process.stdout.write(`${JSON.stringify({ step: 'import' })}\n`);
  await nextStdinLine();

  const second = await askAndRead(page, config, LAW_QUESTION);
  const citations = second.cards.map((c) => c.citation);
  check(
    citations.some((c) => c.toLowerCase().includes(LAW_EXPECT_CITATION)),
    `the law imported while the page was open is not among the sources: ${JSON.stringify(citations)}`,
  );

  const screenshot = join(config.outDir, 'journey.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  const stateAfterStop = await stopSession(page);
  return {
    startAttempts: started.attempts,
    readyMs: started.readyMs,
    firstCitations: first.cards.map((c) => c.citation),
    lawCitations: citations,
    screenshot,
    stateAfterStop,
  };
});
