"""Agent behaviour evals: does Lexvoz search before it answers, cite only what came back, say plainly when
nothing could be verified, ignore instructions hidden in an excerpt and keep personal data out of its
queries?

Live (`make evals` with OPENAI_API_KEY) the suite talks to the real realtime model and asks an LLM judge
where meaning matters. Offline it talks to the local Realtime stand-in driven by scripted model
behaviours, good and deliberately bad, so the checkers themselves are shown to catch misbehaviour.
"""
