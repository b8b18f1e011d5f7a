"""Output for a person: consoles (rich on a terminal, plain text off it), the terminal a command
asks on, and the views several commands share. Commands import it; it knows no command."""
