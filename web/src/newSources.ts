/**
 * "3 fuentes nuevas": at phone width the research panel sits below the conversation, out of sight, so a
 * search that ends there would go unnoticed. The page counts the sources of searches that completed while
 * the panel's list was out of view, and shows that count near the chat until the person has seen them.
 *
 * The rules are kept free of the DOM (`unseenSources`, `newSourcesLabel`) so they are unit-tested; the hook
 * only wires them to an IntersectionObserver on the panel's list.
 */
import { useEffect, useState, type RefObject } from 'react';

import type { ResearchEntry } from './research';

/** How many sources came with completed searches the person has not seen yet (`seen`: their call ids). */
export function unseenSources(entries: readonly ResearchEntry[], seen: ReadonlySet<string>): number {
  return entries
    .filter((e) => e.status === 'completed' && !seen.has(e.callId))
    .reduce((n, e) => n + e.sources.length, 0);
}

/** The notice's words: "1 fuente nueva", "3 fuentes nuevas". */
export function newSourcesLabel(count: number): string {
  return count === 1 ? '1 fuente nueva' : `${count} fuentes nuevas`;
}

/** The bottom band of the window, in CSS px, where a list's top edge peeking in does not count as seen. */
export const PEEK_PX = 80;

/**
 * Whether `target` is on screen, as IntersectionObserver reports it. The bottom `ignoreBottomPx` of the
 * viewport do not count: a list whose top edge just peeks in there has not been seen. Where the browser has
 * no IntersectionObserver, everything counts as seen, so the page never nags about what it cannot measure.
 */
export function useOnScreen(target: RefObject<Element | null>, ignoreBottomPx = PEEK_PX): boolean {
  const [onScreen, setOnScreen] = useState(true);
  useEffect(() => {
    const el = target.current;
    if (!el || typeof IntersectionObserver === 'undefined') return undefined;
    const observer = new IntersectionObserver(
      (records) => {
        const last = records[records.length - 1];
        if (last) setOnScreen(last.isIntersecting);
      },
      { rootMargin: `0px 0px -${ignoreBottomPx}px 0px` },
    );
    observer.observe(el);
    return () => observer.disconnect();
  }, [target, ignoreBottomPx]);
  return onScreen;
}

/**
 * The count of new sources to announce near the chat: zero while the panel's list is on screen (what
 * completes then is seen as it arrives), else the sources of the searches completed since it last was.
 */
export function useNewSources(entries: readonly ResearchEntry[], list: RefObject<Element | null>): number {
  const onScreen = useOnScreen(list);
  const [seen, setSeen] = useState<ReadonlySet<string>>(() => new Set());
  useEffect(() => {
    if (!onScreen) return;
    const completed = entries.filter((e) => e.status === 'completed' && !seen.has(e.callId));
    if (completed.length > 0) setSeen(new Set([...seen, ...completed.map((e) => e.callId)]));
  }, [onScreen, entries, seen]);
  return onScreen ? 0 : unseenSources(entries, seen);
}
