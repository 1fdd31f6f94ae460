"""Replays of recorded sessions: the offline simulator that compares context policies
(``lanes replay``) and the replay model server that lets a hosted session replay a
recording through the real stack (``lanes demo``)."""
