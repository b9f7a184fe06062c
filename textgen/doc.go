// Package textgen is text in, text out over a model that works on token
// ids: a prompt or a chat conversation rendered through the model's chat
// template and encoded, the generated ids decoded as a stream of whole
// UTF-8 characters (special tokens skipped), text stop sequences held back
// until they can no longer match and cut where they do, and the finish
// reason and token usage of each generation.
//
// A [Pipeline] wraps a [Generator] — a *model.Session for one sequence at
// a time, or anything else that generates ids from ids — with the model's
// tokenizer and chat template:
//
//	p := textgen.New(session, tok, chat, maxLen)
//	prompt, err := p.EncodeChat(messages, tokenizer.ChatOptions{AddGenerationPrompt: true})
//	text, res, err := p.Complete(ctx, prompt, textgen.Options{MaxTokens: 64, Stop: []string{"\n\n"}})
//
// [Pipeline.Stream] gives the text piece by piece as it becomes final,
// for a server's streamed responses.
package textgen
