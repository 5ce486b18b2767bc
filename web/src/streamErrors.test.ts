import { DataStreamError, DataStreamErrorReason } from 'livekit-client';
import { describe, expect, it } from 'vitest';

import { installStreamErrorFilter, isStreamCutByDisconnect } from './streamErrors';

function uncaught(target: EventTarget, error: unknown): ErrorEvent {
  const event = new ErrorEvent('error', { error, cancelable: true });
  target.dispatchEvent(event);
  return event;
}

describe('stream errors at disconnect', () => {
  it('recognises only the abnormal end of a data stream', () => {
    expect(isStreamCutByDisconnect(new DataStreamError('cut', DataStreamErrorReason.AbnormalEnd))).toBe(true);
    expect(isStreamCutByDisconnect(new DataStreamError('x', DataStreamErrorReason.LengthExceeded))).toBe(false);
    expect(isStreamCutByDisconnect(new Error('Room disconnected in the middle of receiving data'))).toBe(false);
  });

  it('marks a transcription stream cut by Stop as handled', () => {
    const target = new EventTarget();
    installStreamErrorFilter(target as unknown as Window);
    const event = uncaught(target, new DataStreamError('Room disconnected', DataStreamErrorReason.AbnormalEnd));
    expect(event.defaultPrevented).toBe(true);
  });

  it('leaves every other uncaught error to the page', () => {
    const target = new EventTarget();
    installStreamErrorFilter(target as unknown as Window);
    expect(uncaught(target, new Error('something else broke')).defaultPrevented).toBe(false);
    expect(uncaught(target, new DataStreamError('x', DataStreamErrorReason.LengthExceeded)).defaultPrevented).toBe(
      false,
    );
  });
});
