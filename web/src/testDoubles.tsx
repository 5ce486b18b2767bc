/**
 * The @livekit/components-react double the page's App-level tests share: LiveKitRoom renders its children
 * and records its props, the visual parts render nothing, and the hooks answer as in a connected room with
 * no transcript. Each test passes the hooks it drives itself (the agent it shows, what sending does).
 * Test code only: nothing in the page imports it.
 */
import type { ReactNode } from 'react';

/** A room nobody sends data in: SessionView subscribes to it and hears nothing; what it publishes goes nowhere. */
const quietRoom = {
  name: 'sala',
  on: () => quietRoom,
  off: () => quietRoom,
  localParticipant: { publishData: async () => undefined },
};

export function livekitComponentsDouble<P extends { children?: ReactNode }>(
  renders: P[],
  hooks: Record<string, unknown>,
): Record<string, unknown> {
  const nothing = () => null;
  return {
    LiveKitRoom: (props: P) => {
      renders.push(props);
      return <div data-testid="livekit-room">{props.children}</div>;
    },
    BarVisualizer: nothing,
    RoomAudioRenderer: nothing,
    StartAudio: nothing,
    useConnectionState: () => 'connected',
    useTranscriptions: () => [],
    useLocalParticipant: () => ({ localParticipant: { identity: 'usuario' } }),
    useRoomContext: () => quietRoom,
    ...hooks,
  };
}

/**
 * livekit-client's Room for App-level tests, made from the real module (`actual`): connected from the start,
 * quiet (it never emits), and recording nothing but what App calls on it.
 */
export function connectedRoomClass(actual: typeof import('livekit-client'), fn: typeof import('vitest').vi.fn) {
  return class Room {
    state: string = actual.ConnectionState.Connected;
    remoteParticipants = new Map();
    localParticipant = { trackPublications: new Map(), publishTrack: fn(async () => undefined) };
    disconnect = fn(async () => undefined);
    on() {
      return this;
    }
    off() {
      return this;
    }
    registerTextStreamHandler() {}
    unregisterTextStreamHandler() {}
  };
}
