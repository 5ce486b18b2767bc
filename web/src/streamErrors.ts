/**
 * A text stream cut short by our own disconnect is an expected end, not a page error.
 *
 * When the person presses Stop while the agent is still speaking, livekit-client ends the unfinished
 * `lk.transcription` stream with `DataStreamError` (reason AbnormalEnd). components-react reads that stream
 * through its bundled copy of RxJS without an error handler, so RxJS rethrows the error from a timer and it
 * surfaces as an uncaught page error. Its RxJS is private to the bundle, so the page filters at the window:
 * exactly that error is marked handled, every other error still reaches the page and the console.
 */
import { DataStreamError, DataStreamErrorReason } from 'livekit-client';

export function isStreamCutByDisconnect(err: unknown): boolean {
  return err instanceof DataStreamError && err.reason === DataStreamErrorReason.AbnormalEnd;
}

/** Install once at start-up. */
export function installStreamErrorFilter(target: Pick<Window, 'addEventListener'> = window): void {
  target.addEventListener('error', (event: ErrorEvent) => {
    if (isStreamCutByDisconnect(event.error)) event.preventDefault();
  });
}
