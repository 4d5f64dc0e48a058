"""The cluster: how the hosts of a multi-host job find each other before it starts and learn its outcome after.

protocol.py holds the handshake's messages (its docstring is the protocol), network.py reaching a peer whose
name may resolve late, ssh.py the per-job keys and sshd, master.py the master's side, worker.py a worker's.
"""
