/**
 * Evidence is data, never markup: a search result whose title and excerpt carry an <img onerror> payload
 * must reach the person as those literal characters, and nothing in it may run.
 *
 * The stack's worker points at a test search server that answers every query with such a source (see
 * tests/e2e/test_browser_e2e.py), so the payload travels the real path: search server → gateway →
 * `lexvoz.research` message → research panel. The typed question carries a payload of its own, which
 * the transcript and the panel's query line must show as text too.
 *
 * Env: see harness.mjs; LEXVOZ_E2E_PAYLOAD is the markup the search server embeds (must match).
 */
import { join } from 'node:path';

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

const PAYLOAD = process.env.LEXVOZ_E2E_PAYLOAD || '<img src=x onerror="window.__xss=1">';
const QUESTION = '¿qué dice la ley sintética? <img src=x onerror="window.__xss=2">';
// The part of the query line that identifies this search; the panel echoes the query as text.
const QUERY_FRAGMENT = '¿qué dice la ley sintética?';

/** What a successful injection would leave behind, counted in the page itself. */
function injectionTraces() {
  const panel = document.querySelector('[data-testid="research-panel"]');
  return {
    xss: typeof window.__xss === 'undefined' ? null : String(window.__xss),
    imagesInPanel: panel ? panel.querySelectorAll('img').length : -1,
    imagesInPage: document.querySelectorAll('img').length,
    scriptLinks: [...document.querySelectorAll('a[href]')]
      .map((a) => a.getAttribute('href'))
      .filter((href) => !/^https?:/i.test(href)),
  };
}

await runScenario('browser-e2e-xss', async (page, config) => {
  const started = await startSession(page, config);
  await askByChat(page, QUESTION);
  const entry = await waitForCompletedEntry(page, QUERY_FRAGMENT, config.timeoutMs);
  const cards = await readCards(entry);
  const queryLine = (await entry.locator('[data-testid="research-query"]').textContent()) ?? '';

  // onerror for src=x fires as soon as an element exists, but give the event loop a moment anyway so
  // a late injection is caught too.
  await page.waitForTimeout(500);
  const traces = await page.evaluate(injectionTraces);
  const transcript = await transcriptLines(page);

  check(cards.length > 0, 'no source cards');
  check(
    cards.some((c) => c.text.includes(PAYLOAD)),
    `no card shows the payload as text; cards: ${JSON.stringify(cards.map((c) => c.text))}`,
  );
  check(queryLine.includes(QUESTION), `the query line reads "${queryLine}"`);
  check(traces.imagesInPanel === 0, `${traces.imagesInPanel} <img> element(s) in the research panel`);
  check(traces.imagesInPage === 0, `${traces.imagesInPage} <img> element(s) in the page`);
  check(traces.xss === null, `window.__xss was set to ${traces.xss}: markup from the evidence ran`);
  check(traces.scriptLinks.length === 0, `links that are not http(s): ${JSON.stringify(traces.scriptLinks)}`);

  const screenshot = join(config.outDir, 'browser-e2e-xss.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  const stateAfterStop = await stopSession(page);
  return {
    question: QUESTION,
    stateAfterStart: started.state,
    startAttempts: started.attempts,
    cards,
    queryLine,
    transcript,
    ...traces,
    screenshot,
    stateAfterStop,
  };
});
