package main

// Client and tool sub-commands defined in the other files of this package.
func init() {
	extraCommands = append(extraCommands, newEvalCmd)
}
