/**
 * The page's hello to each new agent that joins its room (topic `lexvoz.page`): whether an agent has already spoken
 * to this person in this room.
 *
 * A conversation's agent can change while the person stays: livekit-server restarts and the page rejoins, the
 * worker running the agent dies and the page asks for another, the person reloads the tab and resumes the same room.
 * The new agent starts with nothing and, unless told, opens with the whole greeting (introduction, disclaimer) to
 * someone who heard it minutes ago and was in the middle of a question. Told `resumed`, it says one short line
 * instead: that it is back and does not keep what was said before (agent/voice/page_hello.py).
 *
 * "Spoken to in this room" is kept in this tab's sessionStorage under the room's name, so a reload that resumes
 * the same room counts too and a new session (always a new room) starts afresh. The hello is sent once per agent
 * identity, only to that agent. It says nothing else: the agent trusts it for that one choice and no more.
 */
import { useEffect, useRef } from 'react';

import { tabStorage } from './session';

export const PAGE_TOPIC = 'lexvoz.page';
const GREETED_STORAGE_KEY = 'lexvoz.greeted';

export interface PageHello {
  v: 1;
  type: 'hello';
  resumed: boolean;
}

/** Whether an agent has spoken to this person in `room` (this tab, this room; without storage, never). */
export function greetedIn(room: string): boolean {
  return room !== '' && tabStorage()?.getItem(GREETED_STORAGE_KEY) === room;
}

function rememberGreeted(room: string): void {
  if (room !== '') tabStorage()?.setItem(GREETED_STORAGE_KEY, room);
}

/** The wire form of a hello. */
export function helloPayload(resumed: boolean): Uint8Array<ArrayBuffer> {
  const hello: PageHello = { v: 1, type: 'hello', resumed };
  return new TextEncoder().encode(JSON.stringify(hello));
}

/** Sends the hello to one agent; a failure is only logged: without a hello the agent greets in full. */
export type SendHello = (payload: Uint8Array<ArrayBuffer>, agentIdentity: string) => Promise<void>;

/**
 * Says hello to each agent that joins `room` while it is connected, and remembers once an agent has spoken
 * (`agentSpoke`: the transcript holds an agent line).
 */
export function usePageHello({
  room,
  connected,
  agentIdentity,
  agentSpoke,
  send,
}: {
  room: string;
  connected: boolean;
  agentIdentity: string | undefined;
  agentSpoke: boolean;
  send: SendHello;
}): void {
  useEffect(() => {
    if (agentSpoke) rememberGreeted(room);
  }, [agentSpoke, room]);

  const greetedAgents = useRef(new Set<string>());
  useEffect(() => {
    if (!connected || agentIdentity === undefined || greetedAgents.current.has(agentIdentity)) return;
    greetedAgents.current.add(agentIdentity);
    send(helloPayload(greetedIn(room)), agentIdentity).catch((error: unknown) => {
      console.warn('could not send the hello to the agent', error);
    });
  }, [connected, agentIdentity, room, send]);
}
