package rabbittest

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestStart: the broker accepts AMQP connections and declares a queue;
// after Stop nothing listens on its port.
func TestStart(t *testing.T) {
	b := Start(t)
	conn, err := amqp.Dial(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	t.Logf("start-up took %v", b.StartupTime)
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := amqp.Dial(b.URL); err == nil {
		t.Fatal("the broker still accepts connections after Stop")
	}
}
