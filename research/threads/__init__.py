"""Jobs as threads: what one room's late handshake does to the other rooms of the same process."""
